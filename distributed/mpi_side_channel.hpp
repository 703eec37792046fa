#pragma once
// The MPI side of a real-process group: our own duplicate of the caller's communicator (errors
// return instead of aborting) and the watchdog's side channel over it. Shared by the MPI backend
// and the NCCL backend (whose communicator is bootstrapped through MPI), so that a timed-out
// collective is reported the same way whichever library moves the data.
//
// The side channel: each rank publishes the sequence number (and kind, count) of the collective it
// last entered in a one-sided window. When one of its own ops times out, the rank's watchdog
// thread reads every peer's entry with passive-target MPI_Get (no peer cooperation needed, so a
// peer that is stuck elsewhere can still be named), prints
//   noeira: error: watchdog: allreduce #17 timed out after 2.0 s; ranks not arrived: 1
// and calls MPI_Abort, which ends every rank of the job with a non-zero exit.
#include <mpi.h>

#include <cstdint>
#include <functional>

#include "distributed/process_group.hpp"
#include "distributed/watchdog.hpp"

namespace noeira::dist {

class MpiSideChannel {
 public:
  // Collective over `parent`: duplicates it, allocates the window and zeroes every entry before
  // any peer may read one. MPI must be initialized.
  explicit MpiSideChannel(MPI_Comm parent);
  // Frees nothing: freeing is collective, so the owner calls close() on every rank together.
  ~MpiSideChannel() = default;
  MpiSideChannel(const MpiSideChannel&) = delete;
  MpiSideChannel& operator=(const MpiSideChannel&) = delete;

  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // Records that this rank entered `call` (called by a backend's start, before the op is posted).
  void publish(const CollectiveCall& call);

  // Collective: frees the window and the communicator. While an exception unwinds this rank
  // alone, skip it (leak) rather than hang: the failing binary aborts the job anyway.
  void close() noexcept;

  // Runs on the watchdog thread and never returns: names the ranks that did not arrive (bounded
  // wait on the side channel), prints the message, runs `before_abort` (the NCCL backend aborts
  // its communicator there), then MPI_Abort(kWatchdogExitCode, in mpi_process_group.hpp).
  [[noreturn]] void fail_job(const CollectiveRecord& record,
                             const std::function<void()>& before_abort = {});

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  std::int64_t* entry_ = nullptr;  // this rank's published entry, in the window
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace noeira::dist
