#pragma once
// Unit<M>: marks M as one unit of the model for data-parallel sharding (docs/design.md, "The sharding policy in rooms"):
// what ZeRO-3 gathers at once and the granularity at which gradient reduction starts during
// backward. Units may sit at any depth: Repeat<L, Unit<Block>> gives one unit per block, and a
// model marks as many as it likes. Every parameter of a marked model must lie in exactly one
// unit (distributed/units.hpp checks it); a model without any mark has the default units (the
// children of its top-level Sequential, or the whole model).
//
// The wrapper is transparent in the walk (M is walked with the Unit's own prefix, as Residual
// does), so marking a module changes no parameter name and no initialization. Its index among the
// model's units is assigned by the walk that builds the policy's units.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/module.hpp"
#include "core/scratch_arena.hpp"

namespace noeira {

template <Module M>
class Unit {
 public:
  static constexpr int arity = M::arity;
  static constexpr std::int64_t in_dim = M::in_dim;
  static constexpr std::int64_t out_dim = M::out_dim;
  static constexpr std::int64_t input_vocab = input_vocab_of<M>();
  static constexpr std::size_t kUnassigned = static_cast<std::size_t>(-1);

  explicit Unit(const Init& init) : inner_(init) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    call_hook(ctx, &UnitHooks::before_forward);
    const Tensor& y = inner_.forward(ctx, x);
    call_hook(ctx, &UnitHooks::after_forward);
    return y;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    call_hook(ctx, &UnitHooks::before_vjp);
    const Tensor& dx = inner_.vjp(ctx, dy, input_grad);
    call_hook(ctx, &UnitHooks::after_vjp);
    return dx;
  }

  // A visitor that collects units (distributed/units.hpp) is told where this one begins and
  // ends, and numbers it; any other visitor sees M's parameters only.
  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    if constexpr (requires { visit.begin_unit(index_); }) {
      visit.begin_unit(index_);
      inner_.for_each_param(visit, prefix);
      visit.end_unit();
    } else {
      inner_.for_each_param(visit, prefix);
    }
  }

  M& inner() { return inner_; }

 private:
  // A hook of the policy driving the model, if any, outside any scratch scope (a chain's vjp runs
  // its links in one, core/scratch_arena.hpp): the policy's buffers are its own, never a slot.
  void call_hook(const Context& ctx, void (UnitHooks::*hook)(std::size_t)) const {
    if (ctx.units == nullptr) return;
    const std::size_t index = checked_index();
    ScratchPause pause;
    (ctx.units->*hook)(index);
  }

  std::size_t checked_index() const {
    NOEIRA_CHECK(index_ != kUnassigned,
                 "Unit: hooks called before the model's units were numbered (dist::walk_units)");
    return index_;
  }

  M inner_;
  std::size_t index_ = kUnassigned;
};

}  // namespace noeira
