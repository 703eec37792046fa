#pragma once
// The MPI side of a real-process group: our own duplicate of the caller's communicator (errors
// return instead of aborting) and the watchdog's side channel over it. Shared by the MPI backend
// and the NCCL backend (whose communicator is bootstrapped through MPI), so that a timed-out
// collective is reported the same way whichever library moves the data.
//
// The side channel: each rank publishes the sequence number (and kind, count) of the collective it
// last entered in a one-sided window, and a heartbeat: a counter its own thread advances every
// kHeartbeatPeriod, whatever the rank is doing. When one of its own ops times out, the rank's
// watchdog thread reads every peer's entry twice, kHeartbeatWatch apart, with passive-target
// MPI_Rget (no peer cooperation needed, so a peer that is stuck elsewhere, or stopped, can still
// be named): a peer behind in sequence did not arrive; one whose counter did not move makes no
// progress at all (SIGSTOP, a wedged node) even if it entered the op; one whose read did not
// complete in time did not answer. It prints
//   noeira: error: watchdog: allreduce #17 timed out after 2.0 s; ranks not arrived: none;
//   heartbeat stopped: 1   (one line)
// and calls MPI_Abort, which ends every rank of the job with a non-zero exit.
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "distributed/process_group.hpp"
#include "distributed/watchdog.hpp"

namespace noeira::dist {

// How often a rank's heartbeat advances, and how long a watchdog watches a peer's: a live process
// beats about ten times meanwhile even on a loaded machine; a stopped one not once.
inline constexpr std::chrono::milliseconds kHeartbeatPeriod{100};
inline constexpr std::chrono::milliseconds kHeartbeatWatch{1000};

class MpiSideChannel {
 public:
  // Collective over `parent`: duplicates it, allocates the window and zeroes every entry before
  // any peer may read one. MPI must be initialized.
  explicit MpiSideChannel(MPI_Comm parent);
  // Stops the heartbeat and frees nothing else: freeing is collective, so the owner calls close()
  // on every rank together.
  ~MpiSideChannel();
  MpiSideChannel(const MpiSideChannel&) = delete;
  MpiSideChannel& operator=(const MpiSideChannel&) = delete;

  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // Records that this rank entered `call` (called by a backend's start, before the op is posted).
  void publish(const CollectiveCall& call);

  // Collective: stops the heartbeat, frees the window and the communicator. While an exception
  // unwinds this rank alone, skip the freeing (leak) rather than hang: the failing binary aborts
  // the job anyway.
  void close() noexcept;

  // Runs on the watchdog thread and never returns: names the ranks that did not arrive, whose
  // heartbeat stopped or that did not answer (bounded waits on the side channel), prints the
  // message, runs `before_abort` (the NCCL backend aborts its communicator there), then
  // MPI_Abort(kWatchdogExitCode, in mpi_process_group.hpp).
  [[noreturn]] void fail_job(const CollectiveRecord& record,
                             const std::function<void()>& before_abort = {});

 private:
  void stop_heartbeat() noexcept;

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  std::int64_t* entry_ = nullptr;  // this rank's published entry, in the window
  int rank_ = 0;
  int size_ = 1;
  // The heartbeat thread advances entry_[kHeartbeatWord] until stop_ is set.
  std::mutex heartbeat_mu_;
  std::condition_variable heartbeat_cv_;
  bool stop_ = false;
  std::thread heartbeat_;
};

}  // namespace noeira::dist
