#pragma once
// The simulated backend: N ranks in one process, one thread per rank, sharing one world that
// performs every collective itself in a fixed reduction order (sum of rank 0, then 1, ... in
// fp32), so a simulated run is reproducible bit for bit whatever the thread scheduling.
#include <functional>

#include "distributed/process_group.hpp"

namespace noeira::dist {

// Runs body(group) on `ranks` threads, one simulated rank each, and joins them. When a rank
// throws, the world is aborted: ranks waiting in (or later entering) a collective get an error
// instead of waiting. Rethrows the error of the rank that failed first (the root cause, not the
// peers' "world aborted" errors); a watchdog timeout or a collective mismatch is reported with
// the collective, its sequence number and the ranks that did not arrive.
void run_simulated(int ranks, const std::function<void(ProcessGroup&)>& body,
                   const ProcessGroupOptions& options = {});

}  // namespace noeira::dist
