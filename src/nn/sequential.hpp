#pragma once
// Sequential<M0, M1, ...>: children applied in order; child i is named "i" in the walk.
// The dims must chain at compile time. The children are a chain: their backward buffers share two
// children's storage (core/scratch_arena.hpp's ChainArenas). A child's output is read by the next
// child alone, so a child that can hold its output in bfloat16 is told to where the next one only
// multiplies it (core/bf16_activation.hpp).
#include <cstddef>
#include <tuple>
#include <utility>

#include "core/bf16_activation.hpp"
#include "core/module.hpp"
#include "core/scratch_arena.hpp"
#include "nn/indexed_children.hpp"

namespace noeira {

template <Module... Ms>
class Sequential {
  static_assert(sizeof...(Ms) > 0, "Sequential needs at least one module");
  using Children = std::tuple<Ms...>;
  static constexpr std::size_t count = sizeof...(Ms);

  template <std::size_t... Is>
  static constexpr bool dims_chain(std::index_sequence<Is...>) {
    return ((std::tuple_element_t<Is, Children>::out_dim ==
             std::tuple_element_t<Is + 1, Children>::in_dim) && ...);
  }
  static_assert(dims_chain(std::make_index_sequence<count - 1>{}),
                "Sequential: each module's out_dim must equal the next module's in_dim");

 public:
  static constexpr int arity = std::tuple_element_t<0, Children>::arity;
  static constexpr std::int64_t in_dim = std::tuple_element_t<0, Children>::in_dim;
  static constexpr std::int64_t out_dim = std::tuple_element_t<count - 1, Children>::out_dim;
  static constexpr std::int64_t input_vocab = input_vocab_of<std::tuple_element_t<0, Children>>();

  static constexpr bool input_is_product_operand =
      ReadsInputAsProductOperand<std::tuple_element_t<0, Children>>;

  explicit Sequential(const Init& init) : children_(init) {
    hold_bf16_outputs(std::make_index_sequence<count - 1>{});
  }

  const Tensor& forward(Context& ctx, const Tensor& x) {
    return forward_from<0>(ctx, x);
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    return vjp_from<count - 1>(ctx, dy, input_grad);
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    children_.for_each_param(visit, prefix);
  }

  template <std::size_t I>
  auto& child() { return children_.template get<I>(); }

  // The children's backward buffers, for drivers that run the children's vjps themselves
  // (distributed/units.hpp).
  ChainArenas& vjp_arenas() { return arenas_; }

 private:
  template <std::size_t... Is>
  void hold_bf16_outputs(std::index_sequence<Is...>) {
    (hold_bf16_output<Is>(), ...);
  }
  template <std::size_t I>
  void hold_bf16_output() {
    using Producer = std::tuple_element_t<I, Children>;
    using Consumer = std::tuple_element_t<I + 1, Children>;
    if constexpr (CanHoldOutputInBf16<Producer> && ReadsInputAsProductOperand<Consumer>) {
      children_.template get<I>().hold_output_in_bf16();
    }
  }

  template <std::size_t I>
  const Tensor& forward_from(Context& ctx, const Tensor& x) {
    const Tensor& y = children_.template get<I>().forward(ctx, x);
    if constexpr (I + 1 < count) {
      return forward_from<I + 1>(ctx, y);
    } else {
      return y;
    }
  }

  template <std::size_t I>
  const Tensor& vjp_from(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const Tensor& dx = arenas_.run(ctx.shared_vjp_buffers, dy, [&]() -> const Tensor& {
      return children_.template get<I>().vjp(ctx, dy, I == 0 ? input_grad : InputGrad::Compute);
    });
    if constexpr (I == 0) {
      return dx;
    } else {
      return vjp_from<I - 1>(ctx, dx, input_grad);
    }
  }

  IndexedChildren<Ms...> children_;
  ChainArenas arenas_;
};

}  // namespace noeira
