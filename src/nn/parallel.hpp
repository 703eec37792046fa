#pragma once
// Parallel<M0, M1, ...>: every child reads the same input; their outputs are concatenated along
// the feature dimension (child 0's columns first, by a Concat). Child i is named "i" in the walk.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "core/module.hpp"
#include "nn/indexed_children.hpp"
#include "nn/merge.hpp"

namespace noeira {

template <Module... Ms>
class Parallel {
  static_assert(sizeof...(Ms) > 0, "Parallel needs at least one module");
  using Children = std::tuple<Ms...>;
  static constexpr std::size_t count = sizeof...(Ms);

  static constexpr std::int64_t first_in = std::tuple_element_t<0, Children>::in_dim;
  static_assert(((Ms::in_dim == first_in) && ...),
                "Parallel: every child must have the same in_dim");

 public:
  static constexpr int arity = std::tuple_element_t<0, Children>::arity;
  static constexpr std::int64_t in_dim = first_in;
  static constexpr std::int64_t out_dim = (Ms::out_dim + ...);

  explicit Parallel(const Init& init) : children_(init), concat_(init) {}

  // The children run in index order (their unit hooks too), then their outputs are joined.
  const Tensor& forward(Context& ctx, const Tensor& x) {
    check_input_rows(ctx, x, in_dim, "Parallel");
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) -> const Tensor& {
      const std::array<const Tensor*, count> ys{&children_.template get<Is>().forward(ctx, x)...};
      return concat_.forward(ctx, *ys[Is]...);
    }(std::index_sequence_for<Ms...>{});
  }

  // Each child gets its own contiguous slice of dy (children expect dense [rows, out] inputs).
  // Input gradients are summed in child order, so the result does not depend on anything else.
  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    concat_.vjp(ctx, dy, InputGrad::Compute);
    if (input_grad == InputGrad::Compute) {
      dx_.resize(output_shape(dy.shape(), out_dim, in_dim), ctx.target);
    }
    vjp_each(ctx, input_grad, std::index_sequence_for<Ms...>{});
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
  void vjp_each(Context& ctx, InputGrad input_grad, std::index_sequence<Is...>) {
    (vjp_child<Is>(ctx, input_grad), ...);
  }

  template <std::size_t I>
  void vjp_child(Context& ctx, InputGrad input_grad) {
    const Tensor& dxi =
        children_.template get<I>().vjp(ctx, concat_.input_grad(static_cast<int>(I)), input_grad);
    if (input_grad == InputGrad::Skip) return;
    if constexpr (I == 0) {
      ctx.k->copy(ctx.stream, dx_.data(), dxi.data(),
                  static_cast<std::size_t>(dxi.numel()) * sizeof(float));
    } else {
      ctx.k->accumulate(ctx.stream, dx_.data(), dxi.data(), dxi.numel());
    }
  }

  IndexedChildren<Ms...> children_;
  Concat<Ms::out_dim...> concat_;  // the outputs' join; its input gradients are dy's slices
  Tensor dx_;                      // [rows, in_dim] sum of the children's input gradients
  Tensor empty_;
};

}  // namespace noeira
