#pragma once
// Residual<M>: y = x + M(x).
//
// Walk names: the child is transparent. M is constructed with the Residual's own Init (same
// path) and walked with the Residual's prefix, so Sequential<A, Residual<B>> names B's weight
// "1.weight", exactly as Sequential<A, B> would. A skip connection adds no parameters, and this
// keeps checkpoint and PyTorch name maps free of an index level that carries nothing (and the
// init streams, which depend on the path, unchanged by wrapping a block in a Residual).
#include <cstdint>
#include <string_view>

#include "core/module.hpp"

namespace noeira {

template <Module M>
class Residual {
  static_assert(M::in_dim == M::out_dim, "Residual<M>: M's out_dim must equal its in_dim");

 public:
  static constexpr int arity = M::arity;
  static constexpr std::int64_t in_dim = M::in_dim;
  static constexpr std::int64_t out_dim = M::out_dim;

  explicit Residual(const Init& init) : inner_(init) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    check_input_rows(ctx, x, in_dim, "Residual");
    const Tensor& fx = inner_.forward(ctx, x);
    y_.resize(fx.shape(), ctx.target);
    ctx.k->add(ctx.stream, y_.data(), x.data(), fx.data(), fx.numel());
    return y_;
  }

  // dx = dy + M.vjp(dy). With Skip nobody reads dx, so M's input gradient is skipped too; M still
  // writes its parameter gradients.
  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const Tensor& dfx = inner_.vjp(ctx, dy, input_grad);
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize(dy.shape(), ctx.target);
    ctx.k->add(ctx.stream, dx_.data(), dy.data(), dfx.data(), dy.numel());
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    inner_.for_each_param(visit, prefix);
  }

  M& inner() { return inner_; }

 private:
  M inner_;
  Tensor y_;   // [rows, dim] x + M(x)
  Tensor dx_;  // [rows, dim] input gradient
  Tensor empty_;
};

}  // namespace noeira
