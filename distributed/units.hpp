#pragma once
// The model seen as units for a sharding policy, and the forward / vjp drivers that make the
// policy's hooks run around each unit.
//
// Units are the modules the model marks with Unit<M> (nn/unit.hpp), at any depth; a model with no
// mark has the default units: the top-level children of its Sequential, or the whole model. Every
// parameter lies in exactly one unit. A unit may borrow a parameter of a LATER unit (a tied
// weight: a GPT's token embedding reads its LM head's table): the walk visits the parameter once,
// where it is owned, and records who borrows it.
#include <cstddef>
#include <string>
#include <utility>

#include "core/module.hpp"
#include "distributed/policy.hpp"
#include "kernels/error.hpp"
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

// What both collectors below do alike: buffers go into the walk as they come, whatever unit they
// lie in.
class BufferCollector {
 public:
  explicit BufferCollector(WalkUnits& out) : out_(out) {}
  void buffer(const std::string& name, Tensor& t) { out_.buffers.push_back({name, &t}); }

 protected:
  WalkUnits& out_;
};

// Collects the walk of a model with Unit marks: the params in walk order, the units' boundaries
// (numbering each unit), and the params each unit borrows.
class MarkedUnitsVisitor : public BufferCollector {
 public:
  explicit MarkedUnitsVisitor(WalkUnits& out) : BufferCollector(out) {}

  void begin_unit(std::size_t& index) {
    NOEIRA_CHECK(!in_unit_, "Unit inside a Unit: units may not nest");
    index = out_.unit_params.size();
    out_.unit_params.push_back(0);
    out_.borrowed.emplace_back();
    in_unit_ = true;
  }
  void end_unit() { in_unit_ = false; }

  void operator()(const std::string& name, Param& p) {
    if (!in_unit_) {
      throw Error(detail::concat("parameter ", name,
                                 " lies in no unit: a model that marks units with Unit<> must mark "
                                 "every module that has parameters"));
    }
    out_.params.push_back({name, &p});
    ++out_.unit_params.back();
  }

  void borrow(Param& p) {
    NOEIRA_CHECK(in_unit_, "a borrowed parameter outside any unit");
    out_.borrowed.back().push_back(&p);
  }

 private:
  bool in_unit_ = false;
};

// Counts the Unit marks of a model (a visitor that takes begin_unit, without collecting).
struct UnitCounter {
  std::size_t units = 0;
  void begin_unit(std::size_t&) { ++units; }
  void end_unit() {}
  void operator()(const std::string&, Param&) {}
  void borrow(Param&) {}
};

// Collects one default unit's params and the buffers beside them.
class UnitCollector : public BufferCollector {
 public:
  explicit UnitCollector(WalkUnits& out) : BufferCollector(out) {}
  void operator()(const std::string& name, Param& p) {
    out_.params.push_back({name, &p});
    ++count_;
  }
  std::size_t count() const { return count_; }

 private:
  std::size_t count_ = 0;
};

template <class Unit>
void collect(Unit& unit, std::string_view prefix, WalkUnits& out) {
  UnitCollector collector(out);
  unit.for_each_param(collector, prefix);
  out.unit_params.push_back(collector.count());
  out.borrowed.emplace_back();
}

template <std::size_t I, class Seq>
const Tensor& forward_from(Seq& model, Context& ctx, const Tensor& x, UnitHooks& hooks) {
  hooks.before_forward(I);
  const Tensor& y = model.template child<I>().forward(ctx, x);
  hooks.after_forward(I);
  if constexpr (I + 1 < SequentialTraits<Seq>::count) {
    return forward_from<I + 1>(model, ctx, y, hooks);
  } else {
    return y;
  }
}

template <std::size_t I, class Seq>
const Tensor& vjp_from(Seq& model, Context& ctx, const Tensor& dy, InputGrad input_grad,
                       UnitHooks& hooks) {
  hooks.before_vjp(I);
  // The children's buffers shared as Sequential's own vjp shares them, the hooks outside.
  const Tensor& dx =
      model.vjp_arenas().run(ctx.shared_vjp_buffers, dy, [&]() -> const Tensor& {
        return model.template child<I>().vjp(ctx, dy, I == 0 ? input_grad : InputGrad::Compute);
      });
  hooks.after_vjp(I);
  if constexpr (I == 0) {
    return dx;
  } else {
    return vjp_from<I - 1>(model, ctx, dx, input_grad, hooks);
  }
}

}  // namespace detail_units

// Whether the model marks its units with Unit<>.
template <Module M>
bool marks_units(M& model) {
  detail_units::UnitCounter counter;
  model.for_each_param(counter, std::string_view{});
  return counter.units > 0;
}

// The walk of `model` with its unit boundaries and borrows; names are the model's walk names.
template <Module M>
WalkUnits walk_units(M& model) {
  WalkUnits out;
  if (marks_units(model)) {
    out.marked = true;
    detail_units::MarkedUnitsVisitor visitor(out);
    model.for_each_param(visitor, std::string_view{});
  } else if constexpr (detail_units::SequentialTraits<M>::is_sequential) {
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
  if (policy.marked_units()) {
    // The marked units call the policy's hooks themselves.
    const ScopedSetting<UnitHooks*> scope(ctx.units, &policy);
    return model.forward(ctx, x);
  }
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
  if (policy.marked_units()) {
    const ScopedSetting<UnitHooks*> scope(ctx.units, &policy);
    return model.vjp(ctx, dy, input_grad);
  }
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
