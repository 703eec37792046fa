#pragma once
// The gradient reducer: starts each unit's gradient reduction as soon as its vjp is done and
// finishes them all before the clip and the step (docs/design.md, "One training step").
//
//   full gradients (DDP)    allreduce per bucket; buckets tile the full gradient buffer from the
//                           top down, whole parameters each, so the last layers' gradients
//                           (final first in backward) leave first
//   ZeRO-1                  each unit reduce-scattered in place into this rank's slice
//   ZeRO-2/3                each unit's transient full gradient reduce-scattered into the
//                           rank's gradient slice; the next unit's vjp waits for it, because it
//                           overwrites that transient buffer
//
// A unit's gradients are final after the vjp of ParamStore::reduce_after(u): its own, or that of
// the first unit that borrows from it (a tied weight gets both contributions before it leaves).
//
// Reductions are sums over ranks: the trainer scales the loss gradient by 1/global_batch, so the
// sum is the global mean and nobody applies 1/N.
//
// Gradient accumulation (--accum K: one optimizer step over K micro-batches, begin_micro_batch):
//   full gradients (DDP, ZeRO-1)  the leaves add each micro-batch into the full gradient (the
//                                 policy hands them GradMode::Accumulate after the first); only
//                                 the last micro-batch reduces, so a step communicates once
//   sliced gradients (ZeRO-2/3)   every micro-batch reduce-scatters each unit (no full gradient
//                                 outlives its unit's vjp): the first into the owned slice, the
//                                 later ones into a scratch slice that is then added to it. A
//                                 pinned unit's whole gradient is overwritten by every
//                                 micro-batch's vjp, slice included, so its sum builds up in a
//                                 slice of its own and lands in the owned slice at the last one.
//   Either way each owned element is the left fold g_0 + g_1 + ... of the micro-batches'
//   reductions in micro-batch order (full gradients: of the local gradients, then reduced), so
//   ZeRO-1 is DDP's bits and ZeRO-3 ZeRO-2's, at any K; the two pairs differ by rounding.
//
// bf16 on the wire (--reduce-dtype bf16): each reduction rounds its fp32 gradients to bf16 into
// a staging buffer, reduces the bf16 copy (process_group.hpp: accumulated in fp32 in rank order,
// rounded once) and widens the result into the fp32 destination, where everything else (the
// accumulation of micro-batches, the clip, the optimizer) stays fp32. Element e of a reduced
// gradient is then fp32(bf16(Σ_r fp32(bf16(g_r[e])))) under every policy, so ZeRO-1 and ZeRO-2/3
// at K = 1 are DDP's bits in bf16 too, and the bytes on the wire halve. The staging buffer is
// shared by the reductions in flight: as large as the full gradient for DDP and ZeRO-1 (every
// bucket or unit in flight at once), two of the largest unit for ZeRO-2/3 (which hold one unit's
// gradient at a time); a reduction that does not fit waits for those in flight first.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.hpp"

#include "distributed/param_store.hpp"
#include "distributed/process_group.hpp"

namespace noeira::dist {

// bf16 gradients (ParamStore::bf16_grads, --grad-dtype bf16) reduce in bf16 only, one micro-batch
// per step. Whole gradients (DDP, ZeRO-1): after the vjp that makes a unit final, its fp32
// gradient is rounded into the bf16 buffer, which the buckets allreduce (or ZeRO-1 reduce-scatters)
// in place, with no staging; sliced ones (ZeRO-2/3) are staged as above and reduce-scattered into
// the bf16 slice. Element e is then bf16(Σ_r fp32(bf16(g_r[e]))) as with fp32 gradients and bf16
// reductions, held in 2 bytes instead of widened into 4.
// The line that refuses bf16 gradients over `accum` > 1 micro-batches (said by the trainer's
// flag check and by begin_micro_batch alike).
std::string bf16_grads_accum_refusal(std::int64_t accum);

class GradReducer {
 public:
  // reduce_dtype: F32, or BF16 on the wire (see above).
  GradReducer(ParamStore& store, ProcessGroup& group, std::int64_t bucket_elements,
              DType reduce_dtype = DType::F32);

  // Before unit u's vjp: where its gradient buffer is still being read by the previous unit's
  // reduction (sliced gradients), wait for it.
  void before_vjp(std::size_t unit);
  // Micro-batch `index` of `count` of this step starts (no call: one micro-batch). Returns the
  // gradient mode its leaves write in: Accumulate for later micro-batches of full gradients.
  GradMode begin_micro_batch(int index, int count);
  // After unit u's vjp: its gradients are final; start what can start.
  void after_vjp(std::size_t unit);
  // Starts what the unit hooks did not (DDP and ZeRO-1 driven without hooks), waits for all.
  // ZeRO-2/3 cannot recover a unit whose reduction was never started: that is an error.
  void finish(Policy policy);
  // No reduction in flight (the step may read the gradients).
  bool idle() const { return pending_.empty(); }
  // Bytes of the accumulation buffers (allocated for count > 1 under sliced gradients) and of
  // the bf16 staging buffer.
  std::int64_t scratch_bytes() const;
  DType reduce_dtype() const { return reduce_dtype_; }

 private:
  struct Bucket {
    Range flat;               // in the full gradient buffer
    std::size_t final_after;  // final once this unit's vjp is done
    bool launched = false;    // this step
  };

  // A reduction in flight and what must follow it once it is done (an accumulation).
  struct Pending {
    Work work;
    std::function<void()> then;
  };

  // bf16 whole gradients: the units final after `finished_unit`'s vjp rounded into the bf16
  // buffer, once per step.
  void round_final(std::size_t finished_unit);
  void launch_ready_buckets(std::size_t finished_unit);
  // bf16 gradients held whole (DDP, ZeRO-1): rounded into the bf16 buffer and reduced there.
  bool bf16_whole_grads() const {
    return store_.bf16_grads() && store_.residency().grads == Extent::Full;
  }
  void launch_unit(std::size_t unit);
  // A later micro-batch's reduction of unit u, into the scratch slice, then added.
  void launch_accumulating(std::size_t unit);
  // Starts the reduction of src (an allreduce in place, or a reduce-scatter of src into dst) in
  // the reducer's wire type; `then` follows once dst holds the result.
  void reduce(Collective kind, float* src, std::int64_t src_count, float* dst,
              std::int64_t dst_count, std::function<void()> then = {});
  // Starts a bf16 reduction: an allreduce of src in place (dst == src), or a reduce-scatter of
  // src into dst.
  void reduce_bf16(Collective kind, std::uint16_t* src, std::int64_t src_count,
                   std::uint16_t* dst, std::int64_t dst_count);
  // n elements of the bf16 staging buffer, free until the reductions in flight are waited for.
  std::uint16_t* wire_buffer(std::int64_t n);
  void wait_pending();
  bool last_micro_batch() const { return micro_index_ + 1 == micro_count_; }

  ParamStore& store_;
  ProcessGroup& group_;
  std::vector<Bucket> buckets_;  // full gradients: descending flat order
  std::vector<bool> launched_;   // [units] reduction started this step
  std::vector<bool> rounded_;    // [units] bf16 whole gradients: rounded this step
  std::vector<Pending> pending_;
  bool scratch_busy_ = false;  // a reduction in flight writes scratch_
  int micro_index_ = 0;
  int micro_count_ = 1;
  Tensor scratch_;                   // [largest shard] a later micro-batch's reduced slice
  std::vector<Tensor> pinned_sums_;  // [units] the running sum of a pinned unit's owned slice
  DType reduce_dtype_;
  Tensor wire_;                // bf16 staging, two elements per word (reduce_dtype_ BF16)
  std::int64_t wire_used_ = 0;  // elements handed out to the reductions in flight
};

}  // namespace noeira::dist
