#pragma once
// The simulated backend: N ranks in one process, one thread per rank, sharing one world that
// performs every collective itself in a fixed reduction order (sum of rank 0, then 1, ... in
// fp32; by nodes when told the ranks per node: node_layout.hpp), so a simulated run is
// reproducible bit for bit whatever the thread scheduling.
//
// The world lives on one target. On the CPU its buffers are host memory; on CUDA they are device
// memory of the calling threads' current device (NCCL refuses several ranks on one GPU, so the
// world moves the data itself), and the reductions run through the target's kernels (copy, then
// accumulate rank by rank): the same fp32 additions in the same order, so a simulated run on the
// GPU reduces to the same bits as on the CPU. Streams: each rank computes on a blocking stream of
// its own (distributed/rank_stream.hpp), so the ranks' kernels overlap; the world enqueues its
// copies and additions on the legacy default stream, which CUDA runs after the earlier work of
// every blocking stream and before their later work. A collective thus reads every rank's
// finished inputs and every rank's next kernels read its outputs, with no event to manage. A
// rank may call the world from a thread whose stream is the default one (nullptr) too.
#include <functional>

#include "distributed/node_layout.hpp"
#include "distributed/process_group.hpp"
#include "kernels/target.hpp"

namespace noeira::dist {

// Runs body(group) on `ranks` threads, one simulated rank each: rank 0 on the calling thread,
// the others on threads it starts and joins (a one-rank run starts none). When a rank
// throws, the world is aborted: ranks waiting in (or later entering) a collective get an error
// instead of waiting. Rethrows the error of the rank that failed first (the root cause, not the
// peers' "world aborted" errors); a watchdog timeout or a collective mismatch is reported with
// the collective, its sequence number and the ranks that did not arrive. ranks_per_node > 0: the
// ranks sum as nodes of that many consecutive ranks would (node_layout.hpp), the bits of
// `mpirun -np ranks` on such nodes; 0: one node.
// The nodes run_simulated's ranks sum as: blocks of ranks_per_node consecutive ranks, or one node
// for 0.
NodeLayout simulated_nodes(int ranks, int ranks_per_node);

void run_simulated(int ranks, const std::function<void(ProcessGroup&)>& body,
                   const ProcessGroupOptions& options = {}, Target target = Target::Cpu,
                   int ranks_per_node = 0);

}  // namespace noeira::dist
