#pragma once
// Sharding policies over the parameter walk: DDP, ZeRO-1, ZeRO-2, ZeRO-3 (DESIGN.md "Sharding").
//
// The policy takes over the parameters' storage: at construction it copies every Param's value
// into its own flat buffers and rebinds Param::val and Param::grd to views of them, so modules
// compute on policy-owned memory without knowing it. Per rank (Ψ = parameter count, N = ranks,
// k = optimizer state buffers: 2 for Adam):
//
//   ddp    params full, grads full, m/v full; grads allreduced per bucket during backward.
//   zero1  params full, grads full, m/v own slice; each unit's grads reduce-scattered in place
//          after its vjp; the updated slices all-gathered after the step.
//   zero2  params full, grads own slice (one unit's full grads exist transiently), m/v own
//          slice; reduce-scatter per unit after its vjp, all-gather after the step.
//   zero3  params own slice + one gathered unit, grads and m/v as zero2; each unit gathered
//          before its forward and again before its vjp (kept if still there), reduce-scatter
//          per unit; nothing to gather after the step.
//
// Units are the top-level children of a Sequential (the whole model otherwise); each unit is
// sharded on its own (distributed/shard.hpp, sharded_layout), so rank r owns slice r of every
// unit. Reductions are sums over ranks; the trainer scales the loss gradient by 1/global_batch,
// so the sum is the global mean and the policy applies no 1/N.
//
// One step, with the drivers of distributed/units.hpp:
//   forward_units(model, ctx, x, policy);           // ZeRO-3 gathers each unit before it runs
//   loss ...; vjp_units(model, ctx, dy, InputGrad::Skip, policy);  // reductions start per unit
//   policy.reduce_gradients();                      // waits for all of them
//   policy.clip_grad_norm(max) (optional);  policy.step(optimizer, lr);
// DDP and ZeRO-1 also accept a plain model.forward / model.vjp followed by reduce_gradients()
// (no overlap); ZeRO-2/3 need the unit drivers, and reduce_gradients() says so otherwise.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/context.hpp"
#include "core/param.hpp"
#include "distributed/process_group.hpp"
#include "distributed/shard.hpp"

namespace noeira {
class Optimizer;
}

namespace noeira::dist {

enum class Policy : std::uint8_t { Ddp, Zero1, Zero2, Zero3 };

// "ddp", "zero1", "zero2", "zero3"; anything else is an InputError listing them.
Policy parse_policy(std::string_view name);
std::string_view to_string(Policy policy);

struct PolicyOptions {
  std::int64_t bucket_elements = 25 * 1024 * 1024 / 4;  // DDP bucket: --bucket-mb 25
  std::int64_t alignment = 32;                          // elements, per parameter and slice
};

// The walk, cut into units: params in walk order with their names, and how many params each
// unit holds (distributed/units.hpp builds it from a model).
struct WalkParam {
  std::string name;
  Param* param = nullptr;
};
struct WalkUnits {
  std::vector<WalkParam> params;
  std::vector<std::size_t> unit_params;  // [units]
};

// Bytes this rank holds, next to DESIGN.md's formula (fp32, k = allocated optimizer buffers).
struct MemoryReport {
  Policy policy = Policy::Ddp;
  int rank = 0;
  int ranks = 1;
  std::int64_t numel = 0;        // Ψ
  std::int64_t param_bytes = 0;  // held between steps
  std::int64_t grad_bytes = 0;
  std::int64_t optimizer_bytes = 0;
  std::int64_t transient_bytes = 0;  // the per-unit gradient buffer (ZeRO-2/3), the initial copy
                                     // (ZeRO-3 before broadcast_initial_parameters)
  double formula_param_bytes = 0;    // ZeRO-3: Ψ/N plus the largest unit (the gathered one)
  double formula_grad_bytes = 0;
  double formula_optimizer_bytes = 0;

  std::int64_t total_bytes() const { return param_bytes + grad_bytes + optimizer_bytes; }
  double formula_total_bytes() const {
    return formula_param_bytes + formula_grad_bytes + formula_optimizer_bytes;
  }
  // "rank 0/2 zero2: params 1.2 MiB (formula 1.2 MiB), grads ..., optimizer ..., total ...".
  std::string to_string() const;
};

class ShardingPolicy {
 public:
  // Takes over the storage of the walk's params (see above), in buffers on ctx.target, which must
  // be the group's buffer target (CUDA: the NCCL or the simulated backend); ctx.grad_mode must be
  // Overwrite (units share the transient gradient buffer).
  ShardingPolicy(Policy policy, const WalkUnits& walk, ProcessGroup& group, const Context& ctx,
                 const PolicyOptions& options = {});
  ~ShardingPolicy();
  ShardingPolicy(const ShardingPolicy&) = delete;
  ShardingPolicy& operator=(const ShardingPolicy&) = delete;

  Policy policy() const { return policy_; }
  // Where every buffer of the policy lives, HeldPiece::data included.
  Target target() const { return k_->target; }
  const ShardedLayout& layout() const { return layout_; }
  ProcessGroup& group() { return group_; }

  // Replaces every rank's parameters by rank 0's (identical seeds are not enough: a replica may
  // have been built or loaded differently). Collective.
  void broadcast_initial_parameters();

  // Unit hooks, called in the same order on every rank (the unit drivers do).
  void before_forward(std::size_t unit);
  void after_forward(std::size_t unit);
  void before_vjp(std::size_t unit);
  void after_vjp(std::size_t unit);  // the unit's gradients are final: start their reduction

  // Finishes every gradient reduction of this step. Afterwards the gradients this rank owns hold
  // the sum over ranks (DDP: every gradient; ZeRO: its slices).
  void reduce_gradients();

  // Σ g² over the WHOLE gradient: per-shard sums and one scalar allreduce (DDP: local, every
  // rank holds the reduced whole). The same value on every rank. Collective for ZeRO.
  double grad_sum_squares();
  // Clips by the global norm (optim/clip.hpp's coefficient); returns the norm before clipping.
  double clip_grad_norm(double max_norm);

  // One optimizer step over what this rank owns; ZeRO-1/2 then all-gather the parameters.
  void step(Optimizer& optimizer, float lr);

  // Every parameter, walk order, without padding. Collective for ZeRO-3 (it gathers).
  std::vector<float> full_parameters();

  // Checkpoint access. A run of parameter elements [param_begin, param_begin + count) of walk
  // parameter `param`, stored contiguously at `data`, in target() memory.
  enum class State : std::uint8_t { Value, M, V };
  struct HeldPiece {
    std::size_t param = 0;
    std::int64_t param_begin = 0;
    std::int64_t count = 0;
    float* data = nullptr;
  };
  // The pieces of rank r's slice of every unit (distributed/shard.hpp): what rank r writes, so
  // that the ranks together write every element once, whatever the policy (DDP holds more, but
  // splits the writing evenly). Empty for M / V before the optimizer state exists.
  std::vector<HeldPiece> slice_pieces(State state);
  // Every piece this rank stores (DDP: everything; ZeRO-1/2: all values, own m / v; ZeRO-3: own
  // slices): what a load must fill. Loading through these pointers makes ZeRO-3's gathered unit
  // stale, so this call forgets it.
  std::vector<HeldPiece> held_pieces(State state);
  // Allocates m / v as `optimizer` needs them (zeroed), before a load fills them.
  void allocate_optimizer_state(const Optimizer& optimizer);

  MemoryReport memory_report() const;

 private:
  struct Bucket {
    Range flat;               // in the full gradient buffer
    std::size_t lowest_unit;  // final once this unit's vjp is done
  };

  bool sharded_params() const { return policy_ == Policy::Zero3; }
  bool sharded_grads() const { return policy_ == Policy::Zero2 || policy_ == Policy::Zero3; }
  bool sharded_state() const { return policy_ != Policy::Ddp; }

  // Unit-local range this rank updates: the whole unit (DDP) or its slice.
  Range owned(std::size_t unit) const;
  // Where the owned range of a unit starts, in each buffer.
  float* owned_params(std::size_t unit);
  float* owned_grads(std::size_t unit);
  std::int64_t state_offset(std::size_t unit) const;

  void gather_unit(std::size_t unit);
  void launch_ready_buckets(std::size_t finished_unit);
  void launch_unit_reduction(std::size_t unit);
  void poll_pending();
  void wait_pending();

  Policy policy_;
  ProcessGroup& group_;
  const KernelTable* k_;
  Stream stream_;
  PolicyOptions options_;
  ShardedLayout layout_;
  std::vector<Decay> decay_;                // [params]
  std::vector<std::vector<Piece>> pieces_;  // [units] owned pieces, unit-local

  Tensor params_full_;   // [full_size]  ddp, zero1, zero2
  Tensor params_shard_;  // [shard_size] zero3
  Tensor gathered_;      // [max_unit_size] zero3: the unit being computed
  Tensor init_full_;     // [full_size] zero3: local initial values until broadcast or first step
  Tensor grads_full_;    // [full_size]  ddp, zero1
  Tensor grads_shard_;   // [shard_size] zero2, zero3
  Tensor grads_unit_;    // [max_unit_size] zero2, zero3: one unit's full gradient, transient
  Tensor m_, v_;         // [full_size] ddp, [shard_size] zero*: allocated by the first step

  std::vector<Bucket> buckets_;  // ddp, descending flat order
  std::size_t next_bucket_ = 0;
  std::vector<bool> unit_reduced_;  // [units] reduction started this step
  std::vector<Work> pending_;
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t gathered_unit_ = kNone;
};

}  // namespace noeira::dist
