#pragma once
// The NCCL backend: one rank per process and per GPU, device buffers (the spans passed to the
// ProcessGroup ops hold device addresses), bootstrapped through MPI. Only in CUDA builds
// (NOEIRA_HAVE_CUDA); this header needs neither NCCL's nor CUDA's headers.
//
// Setup (collective over `comm`, MPI initialized by an MpiRuntime):
//  - the GPU: this rank's node-local rank (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED) modulo the
//    devices it can see, made current on the calling thread. Modulo, not a refusal of more ranks
//    than devices: a launcher that binds one GPU per rank (CUDA_VISIBLE_DEVICES) shows each rank
//    one device 0 that is a different GPU; several ranks really sharing a GPU are refused by NCCL
//    itself at ncclCommInitRank (run them with --sim-ranks instead);
//  - every rank reports whether its local setup worked before anyone enters NCCL, so one rank
//    without a GPU fails the whole job with its message instead of leaving peers waiting;
//  - rank 0 creates the ncclUniqueId and broadcasts it over MPI; ncclCommInitRank.
//
// Ordering: each op runs on the group's own high-priority stream, after everything the caller
// had enqueued on the compute stream when it started the op (a cudaEvent recorded there and
// waited for on the device, so neither the host nor the compute stream blocks). Kernels enqueued
// on the compute stream afterwards run concurrently with the op: that is the overlap with
// backward. Work::is_completed() queries the op's completion event; Work::wait() blocks the host
// until that event completes, polling NCCL's asynchronous error state meanwhile, so a failed
// peer or link is reported as an error rather than a hang. After wait(), the buffers may be used
// on any stream.
//
// The watchdog: the same side channel and report as the MPI backend (distributed/
// mpi_side_channel.hpp); before MPI_Abort it aborts the NCCL communicator (ncclCommAbort), which
// releases kernels stuck waiting for a peer.
#ifdef NOEIRA_HAVE_CUDA

#include <mpi.h>

#include <memory>

#include "distributed/process_group.hpp"
#include "kernels/target.hpp"

namespace noeira::dist {

// CUDA devices this process can see; 0 when there is no driver or no device (never throws).
int visible_cuda_devices();

// This rank's GPU as the NCCL backend chooses it (see above), made current on the calling thread.
// Collective over `comm`. Throws LibraryError when the rank sees no device. A binary may call it
// before building its model, so that tensors land on the device the group will use.
int select_local_device(MPI_Comm comm = MPI_COMM_WORLD);

// A process group over a duplicate of `comm` whose ops are ordered after `compute_stream` (a
// cudaStream_t on the chosen device; nullptr is the legacy default stream). Collective; the group
// must be destroyed on every rank together, after its Works have completed.
std::unique_ptr<ProcessGroup> make_nccl_process_group(const ProcessGroupOptions& options = {},
                                                      Stream compute_stream = nullptr,
                                                      MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace noeira::dist

#endif  // NOEIRA_HAVE_CUDA
