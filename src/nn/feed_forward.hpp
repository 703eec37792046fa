#pragma once
// The transformer's position-wise feed-forward blocks, composed from the Linear family:
//   FeedForwardGELU<C, H>  x -> GELU(x·W1ᵀ + b1)·W2ᵀ + b2            (GPT-2: H = 4C)
//   SwiGLU<C, H>           x -> (SiLU(x·W1ᵀ + b1) ⊙ (x·W3ᵀ + b3))·W2ᵀ + b2   (LLaMA's, with biases)
// GatedProduct<H> is SwiGLU's gate: rows of 2H (the two projections side by side, as Parallel
// concatenates them) to their element-wise product.
#include <cstdint>
#include <string_view>

#include "core/module.hpp"
#include "nn/linear.hpp"
#include "nn/parallel.hpp"
#include "nn/sequential.hpp"

namespace noeira {

template <std::int64_t H>
class GatedProduct {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = 2 * H;
  static constexpr std::int64_t out_dim = H;

  explicit GatedProduct(const Init&) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const std::int64_t rows = check_input_rows(ctx, x, 2 * H, "GatedProduct");
    x_ = &x;
    y_.resize(output_shape(x.shape(), 2 * H, H), ctx.target);
    ctx.k->gated_product_forward(ctx.stream, y_.data(), x.data(), rows, H);
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize(x_->shape(), ctx.target);
    ctx.k->gated_product_backward(ctx.stream, dx_.data(), dy.data(), x_->data(), dy.numel() / H,
                                  H);
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

 private:
  const Tensor* x_ = nullptr;  // forward input [..., 2H], read by vjp
  Tensor y_;                   // [..., H]
  Tensor dx_;                  // [..., 2H]
  Tensor empty_;
};

template <std::int64_t C, std::int64_t H>
using FeedForwardGELU = Sequential<LinearGELU<C, H>, Linear<H, C>>;

template <std::int64_t C, std::int64_t H>
using SwiGLU = Sequential<Parallel<LinearSiLU<C, H>, Linear<C, H>>, GatedProduct<H>, Linear<H, C>>;

}  // namespace noeira
