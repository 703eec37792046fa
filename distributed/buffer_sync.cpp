#include "distributed/buffer_sync.hpp"

#include <span>

namespace noeira::dist {

void SyncedBatchStats::sum(double* values, std::size_t count) {
  group_.allreduce(std::span<double>(values, count)).wait();
}

void broadcast_buffers(ProcessGroup& group, const WalkUnits& walk) {
  if (group.size() == 1) return;
  for (const NamedBuffer& b : walk.buffers) {
    Tensor& t = *b.tensor;
    group.broadcast(std::span<float>(t.data(), static_cast<std::size_t>(t.numel())), 0).wait();
  }
}

}  // namespace noeira::dist
