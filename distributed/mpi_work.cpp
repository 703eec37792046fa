#include "distributed/mpi_work.hpp"

#include <sched.h>

#include <algorithm>
#include <utility>

#include "distributed/mpi_check.hpp"

namespace noeira::dist {

void MpiProgress::remove(PhasedOp* op) {
  pending_.erase(std::remove(pending_.begin(), pending_.end(), op), pending_.end());
}

void MpiProgress::advance() {
  if (advancing_) return;
  advancing_ = true;
  struct Clear {
    bool& flag;
    ~Clear() { flag = false; }
  } clear{advancing_};
  // Over a copy: an op that is done leaves the list while we walk it, and one op may end another
  // (a finished part of a node-wise op is destroyed): only ops still pending are advanced.
  const std::vector<PhasedOp*> ops = pending_;
  for (PhasedOp* op : ops) {
    if (std::find(pending_.begin(), pending_.end(), op) == pending_.end()) continue;
    if (op->advance()) remove(op);
  }
}

void poll_idle(MPI_Comm comm, int looks) {
  int flag = 0;
  NOEIRA_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE));
  if (looks >= 64) sched_yield();
}

bool test_all(std::vector<MPI_Request>& requests, MpiProgress& progress) {
  progress.advance();
  int flag = 0;
  NOEIRA_MPI_CHECK(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag,
                               MPI_STATUSES_IGNORE));
  return flag != 0;
}

void wait_all(std::vector<MPI_Request>& requests, MpiProgress& progress) {
  // Each MPI_Testall runs Open MPI's progress engine once (and yields when idle, as MPI_Wait
  // does: mpi_process_group.cpp sets mpi_yield_when_idle), so polling costs what waiting costs.
  while (!progress.idle()) {
    if (test_all(requests, progress)) return;
  }
  NOEIRA_MPI_CHECK(
      MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
}

bool MpiWork::test() {
  if (!test_all(requests_, progress_)) return false;
  complete();
  return true;
}

void MpiWork::wait() {
  wait_all(requests_, progress_);
  complete();
}

void MpiWork::complete() {
  if (on_complete_) std::exchange(on_complete_, nullptr)();
}

}  // namespace noeira::dist
