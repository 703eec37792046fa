#pragma once
// The model seen as units for a sharding policy, and the forward / vjp drivers that call the
// policy's hooks around each unit. A unit is a top-level child of a Sequential (what ZeRO-3
// gathers at once, and the granularity at which gradient reduction starts during backward); any
// other model is one unit.
#include <cstddef>
#include <string>
#include <utility>

#include "core/module.hpp"
#include "distributed/policy.hpp"
#include "nn/sequential.hpp"

namespace noeira::dist {

namespace detail_units {
template <class M>
struct SequentialTraits {
  static constexpr bool is_sequential = false;
  static constexpr std::size_t count = 1;
};
template <Module... Ms>
struct SequentialTraits<Sequential<Ms...>> {
  static constexpr bool is_sequential = true;
  static constexpr std::size_t count = sizeof...(Ms);
};

template <class Unit>
void collect(Unit& unit, std::string_view prefix, WalkUnits& out) {
  std::size_t count = 0;
  unit.for_each_param(
      [&](const std::string& name, Param& p) {
        out.params.push_back({name, &p});
        ++count;
      },
      prefix);
  out.unit_params.push_back(count);
}

template <std::size_t I, class Seq>
const Tensor& forward_from(Seq& model, Context& ctx, const Tensor& x, ShardingPolicy& policy) {
  policy.before_forward(I);
  const Tensor& y = model.template child<I>().forward(ctx, x);
  policy.after_forward(I);
  if constexpr (I + 1 < SequentialTraits<Seq>::count) {
    return forward_from<I + 1>(model, ctx, y, policy);
  } else {
    return y;
  }
}

template <std::size_t I, class Seq>
const Tensor& vjp_from(Seq& model, Context& ctx, const Tensor& dy, InputGrad input_grad,
                       ShardingPolicy& policy) {
  policy.before_vjp(I);
  const Tensor& dx =
      model.template child<I>().vjp(ctx, dy, I == 0 ? input_grad : InputGrad::Compute);
  policy.after_vjp(I);
  if constexpr (I == 0) {
    return dx;
  } else {
    return vjp_from<I - 1>(model, ctx, dx, input_grad, policy);
  }
}
}  // namespace detail_units

// The walk of `model` with its unit boundaries; names are the model's walk names.
template <Module M>
WalkUnits walk_units(M& model) {
  WalkUnits out;
  if constexpr (detail_units::SequentialTraits<M>::is_sequential) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (detail_units::collect(model.template child<Is>(), std::to_string(Is), out), ...);
    }
    (std::make_index_sequence<detail_units::SequentialTraits<M>::count>{});
  } else {
    detail_units::collect(model, std::string_view{}, out);
  }
  return out;
}

// model.forward(ctx, x) with the policy's hooks around each unit.
template <Module M>
const Tensor& forward_units(M& model, Context& ctx, const Tensor& x, ShardingPolicy& policy) {
  if constexpr (detail_units::SequentialTraits<M>::is_sequential) {
    return detail_units::forward_from<0>(model, ctx, x, policy);
  } else {
    policy.before_forward(0);
    const Tensor& y = model.forward(ctx, x);
    policy.after_forward(0);
    return y;
  }
}

// model.vjp(ctx, dy, input_grad) with the policy's hooks around each unit, last unit first.
template <Module M>
const Tensor& vjp_units(M& model, Context& ctx, const Tensor& dy, InputGrad input_grad,
                        ShardingPolicy& policy) {
  if constexpr (detail_units::SequentialTraits<M>::is_sequential) {
    return detail_units::vjp_from<detail_units::SequentialTraits<M>::count - 1>(model, ctx, dy,
                                                                                input_grad, policy);
  } else {
    policy.before_vjp(0);
    const Tensor& dx = model.vjp(ctx, dy, input_grad);
    policy.after_vjp(0);
    return dx;
  }
}

}  // namespace noeira::dist
