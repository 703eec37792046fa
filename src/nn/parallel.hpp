#pragma once
// Parallel<M0, M1, ...>: every child reads the same input; their outputs are concatenated along
// the feature dimension (child 0's columns first). Child i is named "i" in the walk.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "core/module.hpp"
#include "nn/indexed_children.hpp"

namespace noeira {

namespace detail {
// Column offset of each child's block in the concatenated output.
template <std::size_t N>
constexpr std::array<std::int64_t, N> prefix_offsets(const std::array<std::int64_t, N>& widths) {
  std::array<std::int64_t, N> off{};
  std::int64_t at = 0;
  for (std::size_t i = 0; i < N; ++i) {
    off[i] = at;
    at += widths[i];
  }
  return off;
}
}  // namespace detail

template <Module... Ms>
class Parallel {
  static_assert(sizeof...(Ms) > 0, "Parallel needs at least one module");
  using Children = std::tuple<Ms...>;
  static constexpr std::size_t count = sizeof...(Ms);
  static constexpr std::array<std::int64_t, count> widths = {Ms::out_dim...};
  static constexpr std::array<std::int64_t, count> offsets = detail::prefix_offsets(widths);

  static constexpr std::int64_t first_in = std::tuple_element_t<0, Children>::in_dim;
  static_assert(((Ms::in_dim == first_in) && ...),
                "Parallel: every child must have the same in_dim");

 public:
  static constexpr int arity = std::tuple_element_t<0, Children>::arity;
  static constexpr std::int64_t in_dim = first_in;
  static constexpr std::int64_t out_dim = (Ms::out_dim + ...);

  explicit Parallel(const Init& init) : children_(init) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    check_input_rows(ctx, x, in_dim, "Parallel");
    y_.resize(output_shape(x.shape(), in_dim, out_dim), ctx.target);
    forward_each(ctx, x, std::index_sequence_for<Ms...>{});
    return y_;
  }

  // Each child gets its own contiguous slice of dy (children expect dense [rows, out] inputs).
  // Input gradients are summed in child order, so the result does not depend on anything else.
  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    if (input_grad == InputGrad::Compute) dx_.resize(output_shape(dy.shape(), out_dim, in_dim), ctx.target);
    vjp_each(ctx, dy, input_grad, std::index_sequence_for<Ms...>{});
    return input_grad == InputGrad::Compute ? dx_ : empty_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    children_.for_each_param(visit, prefix);
  }

  template <std::size_t I>
  auto& child() { return children_.template get<I>(); }

 private:
  template <std::size_t... Is>
  void forward_each(Context& ctx, const Tensor& x, std::index_sequence<Is...>) {
    (forward_child<Is>(ctx, x), ...);
  }

  template <std::size_t I>
  void forward_child(Context& ctx, const Tensor& x) {
    const Tensor& yi = children_.template get<I>().forward(ctx, x);
    ctx.k->copy_columns(ctx.stream, GradMode::Overwrite, y_.data() + offsets[I], out_dim,
                        yi.data(), widths[I], x.numel() / in_dim, widths[I]);
  }

  template <std::size_t... Is>
  void vjp_each(Context& ctx, const Tensor& dy, InputGrad input_grad, std::index_sequence<Is...>) {
    (vjp_child<Is>(ctx, dy, input_grad), ...);
  }

  template <std::size_t I>
  void vjp_child(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const std::int64_t rows = dy.numel() / out_dim;
    Tensor& dyi = dys_[I];
    dyi.resize(output_shape(dy.shape(), out_dim, widths[I]), ctx.target);
    ctx.k->copy_columns(ctx.stream, GradMode::Overwrite, dyi.data(), widths[I],
                        dy.data() + offsets[I], out_dim, rows, widths[I]);
    const Tensor& dxi = children_.template get<I>().vjp(ctx, dyi, input_grad);
    if (input_grad == InputGrad::Skip) return;
    if constexpr (I == 0) {
      ctx.k->copy(ctx.stream, dx_.data(), dxi.data(),
                  static_cast<std::size_t>(dxi.numel()) * sizeof(float));
    } else {
      ctx.k->accumulate(ctx.stream, dx_.data(), dxi.data(), dxi.numel());
    }
  }

  IndexedChildren<Ms...> children_;
  Tensor y_;                         // [rows, out_dim] concatenated outputs
  std::array<Tensor, count> dys_;    // [rows, widths[i]] child i's slice of dy
  Tensor dx_;                        // [rows, in_dim] sum of the children's input gradients
  Tensor empty_;
};

}  // namespace noeira
