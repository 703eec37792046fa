#pragma once
// LMHead<C, Vocab>: logits = x · Wᵀ over the vocabulary, W [Vocab, C], no bias (GPT-2's and
// nanoGPT's head). It owns W, drawn from N(0, 0.02) like an embedding table, because W is meant
// to be tied: the model's TiedEmbedding looks its tokens up in the same table (weight() hands
// it over), so the walk visits W once, here, and its gradient is the sum of both uses — this
// module writes its part first (it runs last in forward, first in backward, per ctx.grad_mode),
// the embedding adds its own.
#include <cstdint>
#include <string_view>

#include "core/module.hpp"

namespace noeira {

template <std::int64_t C, std::int64_t Vocab>
class LMHead {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = C;
  static constexpr std::int64_t out_dim = Vocab;

  explicit LMHead(const Init& init) : weight_(init.normal("weight", {Vocab, C}, 0.0f, 0.02f)) {}

  Param& weight() { return weight_; }

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const std::int64_t rows = check_input_rows(ctx, x, C, "LMHead");
    x_ = &x;
    y_.resize(output_shape(x.shape(), C, Vocab), ctx.target);
    ctx.k->linear_forward(ctx.stream, Activation::Identity, y_.data(), nullptr, x.data(),
                          weight_.val.data(), nullptr, rows, C, Vocab);
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    float* dx = nullptr;
    if (input_grad == InputGrad::Compute) {
      dx_.resize(x_->shape(), ctx.target);
      dx = dx_.data();
    }
    ctx.k->linear_backward(ctx.stream, Activation::Identity, ctx.grad_mode, dx, weight_.grd.data(),
                           nullptr, nullptr, dy.data(), x_->data(), weight_.val.data(),
                           y_.data(), nullptr, dy.numel() / Vocab, C, Vocab);
    return input_grad == InputGrad::Compute ? dx_ : empty_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    visit(join_name(prefix, "weight"), weight_);
  }

 private:
  Param weight_;  // [Vocab, C], tied with the token embedding
  const Tensor* x_ = nullptr;  // forward input, read by vjp
  Tensor y_;   // [..., Vocab] logits
  Tensor dx_;  // [..., C] input gradient
  Tensor empty_;
};

}  // namespace noeira
