#pragma once
// The data-parallel side of buffers (core/module.hpp): state that every rank keeps whole, which
// the policy never shards.
//  - SyncedBatchStats is the Context::batch_stats of a rank: the sum over the group's ranks that
//    synchronized batch normalization calls in its forward and vjp, one allreduce of doubles.
//  - broadcast_buffers gives every rank rank 0's buffers: with per-rank batch statistics
//    (--batchnorm local) the running estimates drift apart, and rank 0's are the model's, as
//    PyTorch's DDP takes them; the trainer calls it before evaluating or saving them.
#include "core/context.hpp"
#include "distributed/param_store.hpp"
#include "distributed/process_group.hpp"

namespace noeira::dist {

class SyncedBatchStats final : public CrossRankSum {
 public:
  explicit SyncedBatchStats(ProcessGroup& group) : group_(group) {}
  void sum(double* values, std::size_t count) override;

 private:
  ProcessGroup& group_;
};

// Collective: every rank's buffers become rank 0's (in the group's buffer memory).
void broadcast_buffers(ProcessGroup& group, const WalkUnits& walk);

}  // namespace noeira::dist
