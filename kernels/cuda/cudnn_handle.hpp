#pragma once
// cuDNN state and its check macro: one handle per host thread and device (as the cuBLASLt
// handles in handles.hpp, so that simulated ranks share no handle state), created at first use
// on that device, bound to the caller's stream on every call, destroyed when the thread exits.
#include <cudnn.h>

#include "kernels/cuda/check.hpp"
#include "kernels/target.hpp"

#define CUDNN_CHECK(call)                                                                    \
  do {                                                                                       \
    const cudnnStatus_t noeira_cudnn_status_ = (call);                                       \
    if (noeira_cudnn_status_ != CUDNN_STATUS_SUCCESS) {                                      \
      throw ::noeira::LibraryError(::noeira::detail::concat(                                 \
          #call, " failed: ", cudnnGetErrorString(noeira_cudnn_status_), " at ", __FILE__,   \
          ":", __LINE__));                                                                   \
    }                                                                                        \
  } while (0)

namespace noeira::cuda {

// This thread's handle, set to run on `stream`.
cudnnHandle_t cudnn_handle(Stream stream);

// Points this thread's handle on the current device back at the legacy default stream if it is
// set to `stream`: called as the stream is destroyed, so that a handle outliving a simulated
// rank's stream (rank 0's thread is the caller's and lives on) never holds a dead stream, not
// even until its next use or its cudnnDestroy at thread exit. Never throws.
void unbind_cudnn_stream(Stream stream);

}  // namespace noeira::cuda
