#pragma once
// The MPI backend: one rank per process, non-blocking ops so a Work overlaps compute. Sums
// (allreduce, reduce-scatter) add in rank order, as the simulated backend does, so both give the
// same bits at every N: point-to-point exchanges and a local fold
// (distributed/mpi_ordered_sum.hpp), not MPI's own reductions. The rest are MPI's non-blocking
// collectives (MPI_Iallgather, MPI_Ibcast, MPI_Ibarrier). Open MPI progresses non-blocking ops
// only inside MPI calls, so a policy that wants real overlap polls Work::is_completed()
// (MPI_Test) between units of backward.
//
// The watchdog: each rank publishes the sequence number (and kind, count) of the collective it
// last entered in a one-sided window. When one of its own ops times out, the rank's watchdog
// thread reads every peer's entry with passive-target MPI_Get (no peer cooperation needed, so a
// peer that is stuck elsewhere can still be named), prints
//   noeira: error: watchdog: allreduce #17 timed out after 2.0 s; ranks not arrived: 1
// and calls MPI_Abort, which ends every rank of the job with a non-zero exit.
#include <mpi.h>

#include <memory>

#include "distributed/process_group.hpp"

namespace noeira::dist {

// The exit code MPI_Abort is given when the watchdog fails a job.
inline constexpr int kWatchdogExitCode = 3;

// Owns MPI initialization for the process: the binary creates one in main().
//
// MPI_THREAD_MULTIPLE, not FUNNELED: the watchdog thread calls MPI (MPI_Get on the side-channel
// window, then MPI_Abort) while the training thread may be blocked inside MPI_Wait; FUNNELED
// would forbid both. A library that cannot give MULTIPLE is refused with an error, never
// silently run without a watchdog.
class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int world_rank() const;
  int world_size() const;

  // True when this process was started by an MPI launcher (mpirun, mpiexec, srun with PMI/PMIx),
  // so `mpirun -np N noeira train` picks the MPI backend without a flag.
  static bool launched_by_mpi();

 private:
  bool owns_ = false;  // false when MPI was already initialized by someone else
};

// A process group over a duplicate of `comm` (collective: every rank of comm calls it). The group
// must be destroyed on every rank together, after its Works have completed.
std::unique_ptr<ProcessGroup> make_mpi_process_group(const ProcessGroupOptions& options = {},
                                                     MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace noeira::dist
