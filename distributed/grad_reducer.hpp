#pragma once
// The gradient reducer: starts each unit's gradient reduction as soon as its vjp is done and
// finishes them all before the clip and the step (DESIGN.md "One training step", step 3).
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
#include <cstdint>
#include <vector>

#include "distributed/param_store.hpp"
#include "distributed/process_group.hpp"

namespace noeira::dist {

class GradReducer {
 public:
  GradReducer(ParamStore& store, ProcessGroup& group, std::int64_t bucket_elements);

  // Before unit u's vjp: where its gradient buffer is still being read by the previous unit's
  // reduction (sliced gradients), wait for it.
  void before_vjp(std::size_t unit);
  // After unit u's vjp: its gradients are final; start what can start.
  void after_vjp(std::size_t unit);
  // Starts what the unit hooks did not (DDP and ZeRO-1 driven without hooks), waits for all.
  // ZeRO-2/3 cannot recover a unit whose reduction was never started: that is an error.
  void finish(Policy policy);
  // No reduction in flight (the step may read the gradients).
  bool idle() const { return pending_.empty(); }

 private:
  struct Bucket {
    Range flat;               // in the full gradient buffer
    std::size_t final_after;  // final once this unit's vjp is done
    bool launched = false;    // this step
  };

  void launch_ready_buckets(std::size_t finished_unit);
  void launch_unit(std::size_t unit);
  void wait_pending();

  ParamStore& store_;
  ProcessGroup& group_;
  std::vector<Bucket> buckets_;  // full gradients: descending flat order
  std::vector<bool> launched_;   // [units] reduction started this step
  std::vector<Work> pending_;
};

}  // namespace noeira::dist
