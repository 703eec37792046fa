#pragma once
// Activation leaves: one element-wise activation as its own module (Linear followed by ReLU is two
// modules; LinearReLU is the fused one). The math is kernels/activation_math.hpp. No parameters.
// The output keeps the input's shape, so an activation can sit between image-shaped layers.
#include <cstdint>
#include <string_view>

#include "core/module.hpp"

namespace noeira {

template <std::int64_t Dim, Activation Act>
class ActivationLeaf {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = Dim;
  static constexpr std::int64_t out_dim = Dim;
  static constexpr Activation activation = Act;

  explicit ActivationLeaf(const Init&) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    check_input_rows(ctx, x, Dim, to_string(Act));
    x_ = &x;
    y_.resize(x.shape(), ctx.target);
    ctx.k->activation_forward(ctx.stream, Act, y_.data(), x.data(), x.numel());
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    // No parameters: with the input gradient skipped there is nothing to do.
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize(dy.shape(), ctx.target);
    ctx.k->activation_backward(ctx.stream, Act, dx_.data(), dy.data(), x_->data(), y_.data(),
                               dy.numel());
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

 private:
  const Tensor* x_ = nullptr;  // forward input, read by vjp (GELU and SiLU derivatives need it)
  Tensor y_;                   // [rows, ...] output, the input's shape
  Tensor dx_;                  // [rows, ...] input gradient
  Tensor empty_;
};

template <std::int64_t D>
using ReLU = ActivationLeaf<D, Activation::ReLU>;
template <std::int64_t D>
using Tanh = ActivationLeaf<D, Activation::Tanh>;
template <std::int64_t D>
using Sigmoid = ActivationLeaf<D, Activation::Sigmoid>;
// GELU with the tanh approximation (GPT-2, PyTorch approximate="tanh").
template <std::int64_t D>
using GELU = ActivationLeaf<D, Activation::GeluTanh>;
// GELU with erf (PyTorch's default).
template <std::int64_t D>
using GELUExact = ActivationLeaf<D, Activation::GeluErf>;
template <std::int64_t D>
using SiLU = ActivationLeaf<D, Activation::SiLU>;
template <std::int64_t D>
using ELU = ActivationLeaf<D, Activation::Elu>;
template <std::int64_t D>
using HardSwish = ActivationLeaf<D, Activation::HardSwish>;
template <std::int64_t D>
using Mish = ActivationLeaf<D, Activation::Mish>;
// log(1 + e^x), PyTorch's Softplus (beta 1, threshold 20): a positive output, such as a variance.
template <std::int64_t D>
using Softplus = ActivationLeaf<D, Activation::Softplus>;

}  // namespace noeira
