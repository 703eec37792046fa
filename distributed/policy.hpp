#pragma once
// Sharding policies over the parameter walk: DDP, ZeRO-1, ZeRO-2, ZeRO-3 (docs/design.md, "The sharding policy in rooms").
//
// The policy is the facade of a few rooms, each with one job and its contract in its header:
//   distributed/residency.hpp     what each policy shards (params / grads / optimizer state)
//   distributed/param_store.hpp   the one owner of parameter memory; Params become its handles
//   distributed/grad_reducer.hpp  DDP buckets and per-unit reduce-scatter during backward
//   distributed/sharded_step.hpp  the optimizer step and gradient norm over owned ranges
//   distributed/memory_report.hpp bytes per rank beside the formulas
// What the policy itself adds is the communication between ranks around them: the initial
// broadcast, ZeRO-3's gathers in the unit hooks (distributed/unit_gatherer.hpp), the norm's
// scalar allreduce, ZeRO-1/2's all-gather after the step.
//
// Units are the model's Unit<> marks, or by default the top-level children of a Sequential (the
// whole model otherwise); rank r owns slice r of every unit. One step, with the drivers of
// distributed/units.hpp:
//   forward_units(model, ctx, x, policy);           // ZeRO-3 gathers each unit before it runs
//   loss ...; vjp_units(model, ctx, dy, InputGrad::Skip, policy);  // reductions start per unit
//   policy.reduce_gradients();                      // waits for all of them
//   policy.clip_grad_norm(max) (optional);  policy.step(optimizer, lr);
// DDP and ZeRO-1 in fp32 also accept a plain model.forward / model.vjp followed by
// reduce_gradients() (no overlap); ZeRO-2/3 need the unit drivers (their gradient handles exist
// only inside a unit's vjp), and so does every policy under mixed precision (a unit's bf16 values
// are expanded only inside its hooks) and under bf16 gradients (rounded after each unit's vjp);
// reading a handle outside them is an error naming the parameter.
#include <cstdint>
#include <vector>

#include "core/context.hpp"
#include "distributed/grad_reducer.hpp"
#include "distributed/memory_report.hpp"
#include "distributed/param_store.hpp"
#include "distributed/process_group.hpp"
#include "distributed/residency.hpp"
#include "distributed/unit_gatherer.hpp"

namespace noeira {
class Optimizer;
}

namespace noeira::dist {

struct PolicyOptions {
  std::int64_t bucket_elements = 25 * 1024 * 1024 / 4;  // DDP bucket: --bucket-mb 25
  std::int64_t alignment = 32;                          // elements, per parameter and slice
  // ZeRO-3: units of fewer parameters stay gathered on every rank (param_store.hpp, pinned);
  // 0: none (--zero3-persist-below).
  std::int64_t persist_below = 0;
  // ZeRO-3: gather the next unit while the current one computes, into a second gather buffer
  // (distributed/unit_gatherer.hpp); false: one buffer, each gather when its unit starts
  // (--no-zero3-prefetch).
  bool prefetch = true;
  // The gradient reductions' wire type: F32, or BF16 (grad_reducer.hpp; --reduce-dtype).
  DType reduce_dtype = DType::F32;
  // F32, or BF16: mixed precision, units compute with a bf16 copy of the parameters and the fp32
  // masters are sliced like the optimizer state (param_store.hpp; --precision bf16).
  DType param_dtype = DType::F32;
  // F32, or BF16: gradients held in bf16 once final, reduced in bf16 (needs reduce_dtype BF16;
  // param_store.hpp, grad_reducer.hpp; --grad-dtype bf16).
  DType grad_dtype = DType::F32;
};

class ShardingPolicy final : public UnitHooks {
 public:
  // Adopts the walk's params into a store on ctx.target, which must be the group's buffer target
  // (CUDA: the NCCL or the simulated backend); ctx.grad_mode must be Overwrite (units share the
  // transient gradient buffer).
  ShardingPolicy(Policy policy, const WalkUnits& walk, ProcessGroup& group, const Context& ctx,
                 const PolicyOptions& options = {});
  ShardingPolicy(const ShardingPolicy&) = delete;
  ShardingPolicy& operator=(const ShardingPolicy&) = delete;
  ~ShardingPolicy() = default;

  Policy policy() const { return policy_; }
  // Where every buffer of the policy lives, HeldPiece::data included.
  Target target() const { return store_.target(); }
  const ShardedLayout& layout() const { return store_.layout(); }
  ProcessGroup& group() { return group_; }
  ParamStore& store() { return store_; }
  // Whether the model's units are Unit<> marks, which call the hooks themselves.
  bool marked_units() const { return marked_; }

  // Replaces every rank's parameters by rank 0's (identical seeds are not enough: a replica may
  // have been built or loaded differently). Collective.
  void broadcast_initial_parameters();

  // Unit hooks, called in the same order on every rank (the unit drivers, or the marked units).
  void before_forward(std::size_t unit) override;
  void after_forward(std::size_t unit) override;
  void before_vjp(std::size_t unit) override;
  void after_vjp(std::size_t unit) override;  // its gradients are final: start their reduction

  // Gradient accumulation: micro-batch `index` of the step's `count` starts (in order; no call
  // means one). Returns the gradient mode its forward and vjp must run in (ctx.grad_mode): the
  // leaves add into full gradients after the first micro-batch. Only the last micro-batch's
  // backward is followed by reduce_gradients (distributed/grad_reducer.hpp says what each policy
  // communicates in between).
  GradMode begin_micro_batch(int index, int count) {
    return reducer_.begin_micro_batch(index, count);
  }

  // Finishes every gradient reduction of this step. Afterwards the gradients this rank owns hold
  // the sum over ranks (DDP: every gradient; ZeRO: its slices).
  void reduce_gradients();

  // Σ g² over the WHOLE gradient: per-shard sums and one scalar allreduce (DDP: local, every
  // rank holds the reduced whole). The same value on every rank. Collective for ZeRO.
  double grad_sum_squares();
  // Clips by the global norm (optim/clip.hpp's coefficient); returns the norm before clipping.
  double clip_grad_norm(double max_norm);

  // One optimizer step over what this rank owns; ZeRO-1/2 then all-gather the parameters (under
  // mixed precision: every rank rounds its updated masters into the bf16 copy, which ZeRO-1/2
  // all-gather in bf16).
  void step(Optimizer& optimizer, float lr);

  // Every parameter, walk order, without padding. Collective for ZeRO-3 (it gathers).
  std::vector<float> full_parameters();

  // Checkpoint access (ParamStore::pieces): what this rank writes, or holds and must load.
  std::vector<HeldPiece> pieces(State state, Coverage coverage) {
    gatherer_.settle();  // a load writes the slices a gather in flight reads
    return store_.pieces(state, coverage);
  }
  // Allocates m / v as `optimizer` needs them (zeroed), before a load fills them.
  void allocate_optimizer_state(const Optimizer& optimizer);

  // The store's bytes beside the formulas; transient_bytes includes the reducer's accumulation
  // buffers.
  MemoryReport memory_report() const;
  // ZeRO-3: seconds this rank has waited on parameter gathers (0 for the other policies).
  double gather_wait_seconds() const { return gatherer_.wait_seconds(); }

 private:
  void check_unit(std::size_t unit, const char* hook) const;
  // A unit's values whole for its forward or vjp (its gather or expansion), after the compute
  // copy is made again from the masters where it must be.
  void gather_for_unit(std::size_t unit, PassDirection direction);
  // After a rank's owned values changed (the step; under mixed precision also a load): what every
  // rank holds whole made from every rank's owned range. Mixed precision first rounds the owned
  // masters into the bf16 copy. Collective where the state is sliced.
  void share_updated_values();

  Policy policy_;
  bool marked_;
  ProcessGroup& group_;
  ParamStore store_;
  GradReducer reducer_;
  UnitGatherer gatherer_;
};

}  // namespace noeira::dist
