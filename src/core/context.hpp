#pragma once
// What a forward or vjp call needs besides its tensors: which kernels to run and where, and the
// counters that make stochastic leaves (dropout) reproducible.
#include <cstddef>
#include <cstdint>

#include "kernels/kernel_table.hpp"

namespace noeira {

class ScratchArena;

// Whether a vjp must produce the gradient of its input. The first module of a network skips it:
// nobody reads the gradient of the data, and for an MLP it is a third of the first layer's work.
enum class InputGrad : std::uint8_t { Compute, Skip };

// Training enables dropout; evaluation makes it the identity.
enum class Mode : std::uint8_t { Train, Eval };

// What a unit (nn/unit.hpp) calls around its forward and vjp while a sharding policy drives the
// model (distributed/units.hpp points Context::units at the policy for that forward or vjp):
// ZeRO-3 gathers the unit's parameters before it runs, a unit's gradient reduction starts when
// its vjp is done. `unit` is the unit's index in walk order.
class UnitHooks {
 public:
  virtual void before_forward(std::size_t unit) = 0;
  virtual void after_forward(std::size_t unit) = 0;
  virtual void before_vjp(std::size_t unit) = 0;
  virtual void after_vjp(std::size_t unit) = 0;

 protected:
  ~UnitHooks() = default;
};

// Sums values over the ranks of the data-parallel group, in place, in the target's memory: what a
// synchronized batch normalization (nn/batchnorm.hpp) needs inside its forward and vjp, so that
// its statistics are those of the global batch. Every rank calls it at the same point of the same
// step (it is a collective). The trainer implements it over the policy's process group.
class CrossRankSum {
 public:
  virtual void sum(double* values, std::size_t count) = 0;

 protected:
  ~CrossRankSum() = default;
};

struct Context {
  Target target = Target::Cpu;
  const KernelTable* k = nullptr;
  Stream stream = nullptr;
  Mode mode = Mode::Train;
  GradMode grad_mode = GradMode::Overwrite;
  std::uint64_t seed = 0;        // run seed, for dropout masks
  std::uint64_t step = 0;        // optimizer step, for dropout masks
  std::int64_t row_offset = 0;   // global batch row of this rank's local row 0
  UnitHooks* units = nullptr;    // the policy driving the model's units, if any
  // Training under data parallelism with synchronized batch statistics: the sum over ranks.
  // Null: each rank's statistics are its own rows' (one rank, or --batchnorm local).
  CrossRankSum* batch_stats = nullptr;
  // This rank's rows are a stand-in (a short last batch left the rank without rows of its own):
  // they must not count in batch statistics, nor move running estimates.
  bool stand_in_rows = false;
  // Activation checkpointing (nn/checkpointed.hpp): checkpointed modules keep only their input and
  // output, run their inner modules on this arena's buffers and recompute them in vjp. Null: they
  // keep their activations like any module.
  ScratchArena* scratch = nullptr;
  // The links of a chain (Repeat's copies, the outermost Sequential's children) run their vjps on
  // two alternating scratch arenas (core/scratch_arena.hpp's ChainArenas): the input gradients and
  // backward buffers of all links share two links' storage. False: every link keeps its own (the
  // same gradients, bit for bit; the tests compare the two).
  bool shared_vjp_buffers = true;
  // Under bf16 products, modules told that only products read their output hold it as bfloat16
  // bits (core/bf16_activation.hpp): the same numbers in half the bytes. The trainer sets it
  // unless --fp32-activations; false keeps every activation fp32 (the tests compare the two).
  bool bf16_activations = false;
  // A checkpointed module's vjp is running its forward again: a leaf whose forward changes state
  // beyond its buffers (BatchNorm's running estimates) must not change it a second time.
  bool recomputing = false;

  static Context for_target(Target target, Stream stream = nullptr,
                            Precision precision = Precision::Fp32) {
    Context c;
    c.target = target;
    c.k = &kernels_for(target, precision);
    c.stream = stream;
    return c;
  }
};

// Gives one setting of a Context (ctx.units, ctx.batch_stats, ...) a value for the life of the
// scope, and the old one back after it, on every way out.
template <class T>
class ScopedSetting {
 public:
  ScopedSetting(T& setting, T value) : setting_(setting), saved_(setting) { setting = value; }
  ~ScopedSetting() { setting_ = saved_; }
  ScopedSetting(const ScopedSetting&) = delete;
  ScopedSetting& operator=(const ScopedSetting&) = delete;

 private:
  T& setting_;
  T saved_;
};

}  // namespace noeira
