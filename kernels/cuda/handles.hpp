#pragma once
// cuBLASLt state: one handle per (host thread, device) and one workspace per (thread, device,
// stream).
//
// A user-owned workspace per stream is what keeps cublasLtMatmul bit-reproducible when several
// streams run at once (cuBLAS "Results reproducibility"); one handle per thread avoids sharing
// handle state between simulated ranks. Both are created lazily on the device that is current at
// first use, and released when the thread exits.
#include <cublasLt.h>

#include <cstddef>

#include "kernels/target.hpp"

namespace noeira::cuda {

// Hopper's recommended cuBLASLt workspace (cuBLAS docs, cublasSetWorkspace).
constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;

struct LtContext {
  cublasLtHandle_t handle;
  void* workspace;
  std::size_t workspace_bytes;
};

LtContext lt_context(Stream stream);

// Frees this thread's workspace for `stream` on the current device, if it has one: called as
// the stream is destroyed, so that a stream made per run (a simulated rank's) does not leave
// 32 MiB behind on a thread that lives on (rank 0's is the caller's). Never throws.
void release_lt_workspace(Stream stream);

}  // namespace noeira::cuda
