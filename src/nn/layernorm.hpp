#pragma once
// LayerNorm over each row of D elements: y = (x - mean) / sqrt(var + eps) · weight + bias, with
// the biased variance and eps = Eps, 1e-5 by default (PyTorch's defaults; a ported model gives
// its own, as torch.nn.LayerNorm's eps). weight starts at 1 and bias at 0, neither decayed. mean
// and rstd are saved for the backward pass.
#include <cstdint>
#include <string_view>

#include "core/bf16_activation.hpp"
#include "core/module.hpp"

namespace noeira {

template <std::int64_t D, float Eps = 1e-5f>
class LayerNorm {
  static_assert(Eps > 0.0f, "LayerNorm: eps must be positive");

 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = D;
  static constexpr std::int64_t out_dim = D;
  static constexpr float eps = Eps;

  explicit LayerNorm(const Init& init)
      : weight_(init.constant("weight", {D}, 1.0f)), bias_(init.constant("bias", {D}, 0.0f)) {}

  // Its vjp reads the input and the row statistics, never the output: the output may be bits
  // (core/bf16_activation.hpp).
  void hold_output_in_bf16() { y_.hold(); }

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const std::int64_t rows = check_input_rows(ctx, x, D, "LayerNorm");
    x_ = &x;
    Tensor& y = y_.resize(ctx, x.shape());
    mean_.resize({rows}, ctx.target);
    rstd_.resize({rows}, ctx.target);
    ctx.k->norm_forward_typed(ctx.stream, activation_data(y), y.dtype(), mean_.data(),
                              rstd_.data(), x.data(), weight_.val.data(), bias_.val.data(), rows,
                              D, eps);
    return y;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    // dx is always written: a norm layer is never the first module, where skipping would pay.
    dx_.resize(dy.shape(), ctx.target);
    ctx.k->norm_backward(ctx.stream, ctx.grad_mode, dx_.data(), weight_.grd.data(),
                         bias_.grd.data(), dy.data(), x_->data(), weight_.val.data(),
                         mean_.data(), rstd_.data(), dy.numel() / D, D);
    return input_grad == InputGrad::Compute ? dx_ : empty_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    y_.visit(visit);
    visit(join_name(prefix, "weight"), weight_);
    visit(join_name(prefix, "bias"), bias_);
  }

 private:
  Param weight_;  // [D] scale (gamma)
  Param bias_;    // [D] shift (beta)
  const Tensor* x_ = nullptr;  // forward input, read by vjp
  ProducerOutput y_;  // [rows, D] output, fp32 or bits
  Tensor mean_;   // [rows] row means
  Tensor rstd_;   // [rows] 1 / sqrt(var + eps)
  Tensor dx_;     // [rows, D] input gradient
  Tensor empty_;
};

}  // namespace noeira
