#pragma once
// RMSNorm over each row of D elements: y = x / sqrt(mean(x²) + eps) · weight, eps = Eps, 1e-6 by
// default (as in LLaMA's code; small against any row that carries signal, large enough to keep an
// all-zero row finite). A ported model gives its own: Hugging Face's Llama configs 1e-5 or 1e-6
// (rms_norm_eps), the system noeira follows 1e-4.
// weight starts at 1 and is not decayed. rstd is saved for the backward pass.
#include <cstdint>
#include <string_view>

#include "core/module.hpp"

namespace noeira {

template <std::int64_t D, float Eps = 1e-6f>
class RMSNorm {
  static_assert(Eps > 0.0f, "RMSNorm: eps must be positive");

 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = D;
  static constexpr std::int64_t out_dim = D;
  static constexpr float eps = Eps;

  explicit RMSNorm(const Init& init) : weight_(init.constant("weight", {D}, 1.0f)) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const std::int64_t rows = check_input_rows(ctx, x, D, "RMSNorm");
    x_ = &x;
    y_.resize(x.shape(), ctx.target);
    rstd_.resize({rows}, ctx.target);
    // LayerNorm's kernel without centring (no mean) and without shift (no beta).
    ctx.k->norm_forward(ctx.stream, y_.data(), nullptr, rstd_.data(), x.data(),
                        weight_.val.data(), nullptr, rows, D, eps);
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    // dx is always written (see LayerNorm::vjp).
    dx_.resize(dy.shape(), ctx.target);
    ctx.k->norm_backward(ctx.stream, ctx.grad_mode, dx_.data(), weight_.grd.data(), nullptr,
                         dy.data(), x_->data(), weight_.val.data(), nullptr, rstd_.data(),
                         dy.numel() / D, D);
    return input_grad == InputGrad::Compute ? dx_ : empty_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    visit(join_name(prefix, "weight"), weight_);
  }

 private:
  Param weight_;  // [D] scale
  const Tensor* x_ = nullptr;  // forward input, read by vjp
  Tensor y_;      // [rows, D] output
  Tensor rstd_;   // [rows] 1 / sqrt(mean(x²) + eps)
  Tensor dx_;     // [rows, D] input gradient
  Tensor empty_;
};

}  // namespace noeira
