#pragma once
// The parameter store: the one owner of parameter memory in training (docs/design.md,
// "Parameter memory: one owner"). It adopts a model's walk — copies every Param's initial value into its own flat
// buffers — and from then on holds, in the target's memory and laid out by
// distributed/shard.hpp (rank r owns slice r of every unit):
//
//   values    full buffer (Residency::params Full) or this rank's slices + gather buffers
//   grads     full buffer (grads Full) or this rank's slices + one unit's transient full gradient
//   m, v      the optimizer state over the range this rank updates (state extent), allocated by
//             ensure_state when an optimizer first needs it; nowhere else
//
// A unit that an earlier unit borrows from (a tied weight) is PINNED: where the policy slices
// values or gradients, every rank still holds that unit's values and gradients whole, in buffers
// of its own, for the whole step — both users need them, at the two ends of the forward and the
// backward — while its optimizer state is sliced as the policy says (like ZeRO-1 for that unit).
// Its gradients are final only after the vjp of its first borrower (reduce_after). Under sliced
// values (ZeRO-3) a unit of fewer than `persist_below` parameters is pinned too (DeepSpeed's
// parameter persistence): gathering it before every forward and vjp would cost more in latency
// than holding it whole costs in memory.
//
// Sliced values are gathered into gather buffers, each the size of the largest unpinned unit and
// holding one unit's full values or none: one buffer, or two when the policy prefetches (the next
// unit's gather fills one while the current unit computes from the other).
//
// Mixed precision (bf16 values, --precision bf16): the units compute with a bf16 copy of the
// parameters, and the fp32 values are the optimizer's masters (the ZeRO paper's accounting):
//
//   masters   fp32, sliced like the optimizer state (a rank updates and holds its owned range)
//   compute   bf16, the rounded masters, full or sliced like the values above (2 bytes each)
//
// A unit's compute values reach its Params as fp32 words holding bf16 values, in a gather buffer
// filled only while the unit runs: expanded from the full bf16 copy (DDP, ZeRO-1/2) or
// all-gathered in bf16 and expanded (ZeRO-3; a staging buffer per gather buffer). Pinned units
// keep whole fp32 copies of their rounded values. After a step the policy rounds each rank's
// owned masters into the compute copy and all-gathers what the others need; a load marks the
// compute copy stale until it does (refresh_needed). The initial values are full on every rank,
// so the first compute copy is rounded from them without communication.
//
// bf16 gradients (grad_dtype BF16, --grad-dtype bf16): a unit's gradients are held as bfloat16
// once they are final, 2 bytes each, where fp32 gradients would be (the whole buffer, or the
// rank's slices). The leaves still write fp32, into the transient unit buffer of ZeRO-2/3 under
// every policy (pinned units into whole fp32 copies of their own, as sliced gradients do); the
// reducer rounds them into the bf16 gradients, which it reduces in bf16 with fp32 sums. The step
// and the norm read the owned bf16 gradients widened, unit by unit, into that same fp32 buffer
// (widened_owned_grads), and a clip scales the widened values (scale_bf16_grads), so nothing is
// rounded twice: the values the optimizer sees are those of fp32 gradients with bf16 reductions.
//
// Param::val / Param::grd are handles into these buffers. A handle whose memory the store does
// not hold now (a ZeRO-3 value outside its unit's gather, a ZeRO-2/3 gradient outside its unit's
// vjp) is an absent tensor: reading it is an error that names the parameter, never another
// unit's bytes. The store knows no process group: the policy (distributed/policy.hpp) moves data
// between ranks into the regions the store hands out, then binds the handles.
#include <cstdint>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "core/param.hpp"
#include "distributed/residency.hpp"
#include "distributed/shard.hpp"

namespace noeira::dist {

class ProcessGroup;

// The walk, cut into units: params in walk order with their names, how many params each unit
// holds, and the params each unit borrows from a later one (distributed/units.hpp builds it);
// and the model's buffers, which belong to no unit (replicated on every rank, never sharded).
struct WalkUnits {
  std::vector<NamedParam> params;
  std::vector<NamedBuffer> buffers;  // walk order, wherever they lie
  std::vector<std::size_t> unit_params;      // [units]
  std::vector<std::vector<Param*>> borrowed;  // [units] params of later units it also uses
  bool marked = false;  // the units are the model's Unit<> marks (their hooks run themselves)
};

// Which per-parameter buffer.
enum class State : std::uint8_t { Value, M, V };

// Which part of a buffer a rank's pieces cover: Written, its slice of every unit (what it writes
// to a checkpoint, so that the ranks together write every element once whatever the policy);
// Held, everything it stores (what a load must fill).
enum class Coverage : std::uint8_t { Written, Held };

// A run of parameter elements [param_begin, param_begin + count) of walk parameter `param`,
// stored contiguously at `data`, in the store's target memory.
struct HeldPiece {
  std::size_t param = 0;
  std::int64_t param_begin = 0;
  std::int64_t count = 0;
  float* data = nullptr;
};

class ParamStore {
 public:
  // Adopts the walk's parameters (on ctx.target) for rank `rank` of `ranks`.
  // value_dtype: F32, or BF16 for mixed precision (above). `group`, when given, is the group
  // whose collectives move the values, the bf16 copy and the gradients: those buffers (and the
  // gather buffers) come from its shared memory (collective_tensor.hpp), and the constructor is
  // collective over it.
  ParamStore(const WalkUnits& walk, Residency residency, int rank, int ranks, const Context& ctx,
             std::int64_t alignment = 32, std::int64_t persist_below = 0,
             std::size_t gather_buffers = 1, DType value_dtype = DType::F32,
             ProcessGroup* group = nullptr, DType grad_dtype = DType::F32);
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  Residency residency() const { return residency_; }
  // Mixed precision: bf16 compute values, fp32 masters (above).
  bool mixed() const { return mixed_; }
  // bf16 gradients (above).
  bool bf16_grads() const { return bf16_grads_; }
  // Whether units' gradients exist as fp32 only during their vjp (in the transient unit buffer):
  // sliced gradients, or bf16 ones.
  bool transient_grads() const { return bf16_grads_ || residency_.grads == Extent::Slice; }
  // Whether units' values exist only between their hooks (gathered or expanded): sliced values,
  // or mixed precision.
  bool gathers_values() const { return mixed_ || residency_.params == Extent::Slice; }
  // How much of the fp32 values a rank keeps: the values' extent, or under mixed precision the
  // masters', which is the optimizer state's.
  Extent value_extent() const { return mixed_ ? residency_.state : residency_.params; }
  const ShardedLayout& layout() const { return layout_; }
  std::size_t unit_count() const { return layout_.unit_count(); }
  int rank() const { return rank_; }
  const KernelTable& kernels() const { return *k_; }
  Target target() const { return k_->target; }
  Stream stream() const { return stream_; }
  Decay decay(std::size_t param) const { return decay_[param]; }
  const std::string& name(std::size_t param) const { return walk_.params[param].name; }

  // Unit-local range this rank updates (and holds optimizer state for): the whole unit (state
  // Full) or its slice; and the parameter pieces inside it.
  Range owned(std::size_t unit) const;
  const std::vector<Piece>& owned_pieces(std::size_t unit) const { return pieces_[unit]; }

  // Borrowed by an earlier unit: held whole (see above).
  bool pinned(std::size_t unit) const { return pinned_[unit]; }
  // Whether this rank holds unit u's values / gradients whole (Full, or pinned).
  bool whole_values(std::size_t unit) const;
  bool whole_grads(std::size_t unit) const;
  // The unit after whose vjp unit u's gradients are final: u itself, or its first borrower.
  std::size_t reduce_after(std::size_t unit) const { return reduce_after_[unit]; }

  // Where unit u's values are in full (its padded range): the full buffer, its pinned copy, or
  // the gather buffer holding it (an error when none does); where its owned values are: this
  // rank's slice of them (the all-gather source and target of ZeRO), under mixed precision the
  // owned masters (what the optimizer updates).
  float* unit_values(std::size_t unit);
  float* owned_values(std::size_t unit);
  // All fp32 values where a rank holds them whole (value_extent() Full): the broadcast's buffer.
  float* full_values();
  // Unit u's whole fp32 gradient, where its vjp writes it (the full buffer, or the transient unit
  // buffer for sliced or bf16 gradients, or a pinned unit's whole copy), and the owned range of
  // it after reduction (fp32 gradients only).
  float* unit_grads(std::size_t unit);
  float* owned_grads(std::size_t unit);
  // bf16 gradients: unit u's owned range of them (the reduced gradient), and the whole unit in
  // them (whole gradients: what it is rounded into and reduced from in place).
  std::uint16_t* owned_bf16_grads(std::size_t unit);
  std::uint16_t* unit_bf16_grads(std::size_t unit);
  // Unit u's owned reduced gradient in fp32, for the norm and the step: owned_grads, or under bf16
  // gradients the owned bf16 range widened (and scaled by the pending clip) into the transient
  // buffer, valid until the next call.
  float* widened_owned_grads(std::size_t unit);
  // bf16 gradients: the clip's factor, applied when they are widened, until reset_grad_scale
  // (a new step's reduction).
  void scale_bf16_grads(float factor) { grad_scale_ *= factor; }
  void reset_grad_scale() { grad_scale_ = 1.0f; }
  // m or v over unit u's owned range; null before ensure_state allocated it.
  float* owned_state(State state, std::size_t unit);
  // Mixed precision: unit u's owned range of the bf16 compute copy (the all-gather source), and
  // the whole unit in it (values held full: the all-gather target and the expansion's source).
  std::uint16_t* owned_compute(std::size_t unit);
  std::uint16_t* unit_compute(std::size_t unit);
  // Rounds unit u's owned masters into its owned compute range (and, for a pinned unit, into the
  // owned range of its whole fp32 copy), which the policy then all-gathers where state is sliced.
  void round_owned(std::size_t unit);
  // Whether the compute copy must be made again from the masters before a unit runs (mixed
  // precision: after a load wrote the masters), and who says it has been or must be.
  bool refresh_needed() const { return refresh_needed_; }
  void set_refresh_needed(bool needed) { refresh_needed_ = mixed_ && needed; }
  // ZeRO-3 under mixed precision: the bf16 buffer gather buffer b's unit is all-gathered into
  // before it is expanded; null otherwise.
  std::uint16_t* staging_buffer(std::size_t buffer);
  bool has_state(State state) const;
  // Allocates m and / or v (zeroed) as needed; the first stateful step calls it.
  void ensure_state(bool m, bool v);

  // ZeRO-3's gather buffers (see above): how many, the one holding unit u (kNone: none), where
  // one is, and which unit it holds from now on (kNone while a gather overwrites it, or when its
  // copy is stale). bind_values binds a unit's handles to its values wherever they are held;
  // release_values makes them absent (a no-op for a unit held whole).
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t gather_buffers() const { return gathered_.size(); }
  std::size_t buffer_holding(std::size_t unit) const;
  float* gather_buffer(std::size_t buffer) { return gathered_[buffer].data(); }
  void set_held(std::size_t buffer, std::size_t unit) { held_unit_[buffer] = unit; }
  // Every gathered copy is stale: the slices changed (a step, a load, the initial broadcast).
  void forget_gathered();
  void bind_values(std::size_t unit);
  void release_values(std::size_t unit);
  // ZeRO-2/3: the handles of a unit's gradients bound to the transient buffer, or absent.
  void bind_grads(std::size_t unit);
  void release_grads(std::size_t unit);

  // Sliced fp32 values (ZeRO-3, or the masters of mixed precision under ZeRO-1/2/3): the full
  // initial values (from the adopted walk), kept until training starts so that the initial
  // broadcast can replace them; null afterwards. take_initial_slices copies this
  // rank's slices from them (after the broadcast) and drops them; drop_initial only drops them
  // (the first forward or step: the slices are already this rank's, maybe loaded since).
  float* initial_values();
  void take_initial_slices();
  void drop_initial();

  // The pieces of `state` a rank writes or holds (Coverage). Empty for M / V before they exist.
  // Held pieces are written through by a load, which makes the gathered units stale: they are
  // forgotten here.
  std::vector<HeldPiece> pieces(State state, Coverage coverage);

  // Bytes this rank holds, by kind (memory accounting, distributed/memory_report.hpp).
  std::int64_t value_bytes() const;
  std::int64_t grad_bytes() const;
  std::int64_t state_bytes() const;
  std::int64_t transient_bytes() const;  // the transient unit gradient, the initial copy
  // Elements of the largest unpinned unit (each gather buffer, the transient gradient) and of all
  // pinned units.
  std::int64_t largest_unpinned_unit() const;
  std::int64_t pinned_elements() const;

 private:
  // Unit u's owned range in a buffer of the given extent (null for an unallocated buffer).
  float* owned_of(Extent extent, Tensor& buffer, Tensor& pinned, std::size_t unit);
  // Unit u's owned range in a bf16 buffer of the given extent (the compute copy, bf16 gradients).
  std::uint16_t* owned_bf16(Tensor& buffer, Extent extent, std::size_t unit);
  // Unit u's owned range in a buffer of the optimizer state's extent (m, v, mixed precision's
  // masters): a rank updates the whole unit there, or its slice.
  float* owned_in_state(Tensor& buffer, std::size_t unit);
  // The tensor unit u's whole values lie in (unit_values points into it).
  Tensor& values_buffer(std::size_t unit);
  void bind(std::size_t unit, bool values);
  void release(std::size_t unit, bool values);
  void take_initial_slices_from(const Tensor& full);
  // Mixed precision: the compute copy (and pinned units' whole copies) rounded from full fp32
  // values every rank holds, with no communication.
  void round_compute_from(const Tensor& full);

  WalkUnits walk_;
  Residency residency_;
  int rank_;
  const KernelTable* k_;
  Stream stream_;
  ShardedLayout layout_;
  std::vector<Decay> decay_;                // [params]
  std::vector<std::vector<Piece>> pieces_;  // [units] owned pieces, unit-local
  std::vector<bool> pinned_;                // [units]
  std::vector<std::size_t> reduce_after_;   // [units]
  std::vector<Tensor> pinned_values_;       // [units] padded unit, pinned units of sliced values
  std::vector<Tensor> pinned_grads_;        // [units] padded unit, pinned units of sliced grads

  Tensor values_;      // [full_size] or [shard_size] (params Slice)
  std::vector<Tensor> gathered_;        // [gather buffers][largest unpinned unit] params Slice
  std::vector<std::size_t> held_unit_;  // [gather buffers] the unit each holds, or kNone
  Tensor initial_;     // [full_size] params Slice: initial values until the slices are taken
  Tensor grads_;       // [full_size] or [shard_size] (grads Slice); bf16 for bf16 gradients
  // One unit's full gradient, transient (sliced or bf16 gradients): [largest unpinned unit], and
  // for bf16 gradients at least the largest owned range (where they are widened).
  Tensor grads_unit_;
  Tensor m_, v_;       // [full_size] or [shard_size] (state Slice), allocated by ensure_state

  bool bf16_grads_ = false;
  float grad_scale_ = 1.0f;  // bf16 gradients: the clip's factor (scale_bf16_grads)

  // Mixed precision (values_ then holds the masters, extent value_extent()).
  bool mixed_ = false;
  bool refresh_needed_ = false;  // the compute copy is not the rounded masters
  Tensor compute_;               // bf16 [full_size] or [shard_size] (params Slice)
  std::vector<Tensor> staged_;   // bf16 [gather buffers][largest unpinned unit], params Slice
};

}  // namespace noeira::dist
