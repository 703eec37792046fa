#pragma once
// Softmax over each row of D elements (the last dimension for a [rows, D] input), numerically
// stable (the row max is subtracted first). No parameters. For training a classifier prefer the
// cross-entropy loss on logits, which fuses softmax and is more accurate.
#include <cstdint>
#include <string_view>

#include "core/module.hpp"

namespace noeira {

template <std::int64_t D>
class Softmax {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = D;
  static constexpr std::int64_t out_dim = D;

  explicit Softmax(const Init&) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const std::int64_t rows = check_input_rows(ctx, x, D, "Softmax");
    y_.resize(x.shape(), ctx.target);
    ctx.k->softmax_forward(ctx.stream, y_.data(), x.data(), rows, D);
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize(dy.shape(), ctx.target);
    ctx.k->softmax_backward(ctx.stream, dx_.data(), dy.data(), y_.data(), dy.numel() / D, D);
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

 private:
  Tensor y_;   // [rows, D] output, also what the backward needs
  Tensor dx_;  // [rows, D] input gradient
  Tensor empty_;
};

}  // namespace noeira
