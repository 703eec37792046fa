#pragma once
// Checkpointed<M>: activation checkpointing. With ctx.scratch set (--checkpoint-activations), the
// forward keeps its input and a copy of its output and nothing else: M runs on the scratch
// arena's buffers (core/scratch_arena.hpp), which every checkpointed module of the rank shares.
// The vjp runs M's forward again on the same input, with the forward's mode, step and rows (so
// dropout draws the same masks), then M's vjp, and copies out the input gradient. The gradients
// are those of M run plainly, bit for bit; the price is one more forward of M per step.
//
// With ctx.scratch null the wrapper is transparent: M's forward and vjp, M's buffers. Either way
// the walk is transparent (M walked with the wrapper's prefix, as Residual does): wrapping a block
// changes no parameter name and no initialization.
//
// Units go outside: Unit<Checkpointed<Block>>, so that ZeRO-3 has gathered the block's parameters
// for the recomputed forward. A Unit inside would have its hooks called a second time in the
// backward pass; under a sharding policy that is an error, named.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/module.hpp"
#include "core/scratch_arena.hpp"

namespace noeira {

namespace detail_checkpointed {
// The hooks a unit inside a checkpointed module would reach.
class RefusedUnitHooks final : public UnitHooks {
 public:
  void before_forward(std::size_t) override { refuse(); }
  void after_forward(std::size_t) override { refuse(); }
  void before_vjp(std::size_t) override { refuse(); }
  void after_vjp(std::size_t) override { refuse(); }

 private:
  [[noreturn]] static void refuse() {
    throw Error(
        "Checkpointed: a Unit inside a checkpointed module would be driven twice per step; put "
        "the unit outside (Unit<Checkpointed<M>>)");
  }
};
inline RefusedUnitHooks refused_unit_hooks;
}  // namespace detail_checkpointed

template <Module M>
class Checkpointed {
 public:
  static constexpr int arity = M::arity;
  static constexpr std::int64_t in_dim = M::in_dim;
  static constexpr std::int64_t out_dim = M::out_dim;

  explicit Checkpointed(const Init& init) : inner_(init) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    arena_ = ctx.scratch;
    if (arena_ == nullptr) return inner_.forward(ctx, x);
    x_ = &x;
    forward_ctx_ = ctx;
    const Tensor* y = nullptr;
    {
      ScratchScope scope(*arena_);
      Context inner_ctx = inner_context(ctx, false);
      y = &inner_.forward(inner_ctx, x);
    }
    // Outside the scope y_ has storage of its own (or the next slot of an enclosing scope's).
    y_.resize(y->shape(), ctx.target);
    copy(ctx, y_, *y);
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    if (arena_ == nullptr) return inner_.vjp(ctx, dy, input_grad);
    const Tensor* dx = nullptr;
    {
      ScratchScope scope(*arena_);
      Context inner_ctx = inner_context(ctx, true);
      inner_.forward(inner_ctx, *x_);
      dx = &inner_.vjp(inner_ctx, dy, input_grad);
    }
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize(dx->shape(), ctx.target);
    copy(ctx, dx_, *dx);
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    visit_site(visit, WalkSite::Checkpointed);
    inner_.for_each_param(visit, prefix);
  }

  M& inner() { return inner_; }

 private:
  // The context M runs in: for the recomputation, the forward's mode, step and rows with the
  // vjp's gradient mode.
  Context inner_context(const Context& ctx, bool recompute) const {
    Context inner = ctx;
    if (recompute) {
      inner.mode = forward_ctx_.mode;
      inner.seed = forward_ctx_.seed;
      inner.step = forward_ctx_.step;
      inner.row_offset = forward_ctx_.row_offset;
      inner.stand_in_rows = forward_ctx_.stand_in_rows;
      inner.batch_stats = forward_ctx_.batch_stats;
      inner.recomputing = true;
    }
    if (inner.units != nullptr) inner.units = &detail_checkpointed::refused_unit_hooks;
    return inner;
  }

  static void copy(const Context& ctx, Tensor& dst, const Tensor& src) {
    ctx.k->copy(ctx.stream, dst.data(), src.data(),
                static_cast<std::size_t>(src.numel()) * sizeof(float));
  }

  M inner_;
  ScratchArena* arena_ = nullptr;  // of the last forward; null: M ran plainly
  const Tensor* x_ = nullptr;      // forward input, recomputed from in vjp
  Context forward_ctx_;            // of the last forward
  Tensor y_;                       // copy of M's output
  Tensor dx_;                      // copy of M's input gradient
  Tensor empty_;
};

// The checkpoint sites of a model: its Checkpointed modules.
template <class M>
std::size_t checkpoint_sites(M& model) {
  return walk_sites(model, WalkSite::Checkpointed);
}

}  // namespace noeira
