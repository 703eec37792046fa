#pragma once
// Blocking collectives on host values for a group of any buffer target. Control values (loss
// sums, stop flags, counts, the clip norm's partial sums) live on the host; a group whose buffers
// live on a device (NCCL, the simulated world on a GPU) gets them through a staging tensor on its
// device. A few bytes per call: never a hot path.
#include <span>

#include "distributed/process_group.hpp"

namespace noeira::dist {

// values = Σ over ranks of values.
void allreduce_host(ProcessGroup& group, std::span<float> values);
// out segment q = rank q's in; out.size() == in.size() · group.size().
void all_gather_host(ProcessGroup& group, std::span<const float> in, std::span<float> out);

}  // namespace noeira::dist
