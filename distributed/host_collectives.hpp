#pragma once
// Blocking collectives on host values for a group of any buffer target. Control values (loss
// sums, stop flags, counts, the clip norm's partial sums) live on the host, in their own type:
// doubles stay doubles and counts stay int64 across the collective. A group whose buffers live on
// a device (NCCL, the simulated world on a GPU) gets them through its staging buffer
// (ProcessGroup::staging: allocated once, so no call frees device memory, which would synchronize
// the device). A few bytes per call: the copies to and from the device synchronize the host with
// the group's work, which these calls need anyway (they return the result).
#include <span>
#include <type_traits>

#include "distributed/process_group.hpp"

namespace noeira::dist {

// values = Σ over ranks of values.
void allreduce_host(ProcessGroup& group, Buffer values);
// out segment q = rank q's in; out.count == in.count · group.size().
void all_gather_host(ProcessGroup& group, ConstBuffer in, Buffer out);

// Σ over ranks of one value.
template <class T>
T sum_over_ranks(ProcessGroup& group, T value) {
  allreduce_host(group, std::span<T>(&value, 1));
  return value;
}

}  // namespace noeira::dist
