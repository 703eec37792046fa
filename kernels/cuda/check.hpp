#pragma once
// One check macro per library: a failed CUDA runtime or cuBLAS(Lt) call throws
// noeira::LibraryError naming the call, the library's own message and file:line. Never assert:
// a GPU error is a run-time failure and must survive Release builds.
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "kernels/error.hpp"

#define CUDA_CHECK(call)                                                                     \
  do {                                                                                       \
    const cudaError_t noeira_cuda_status_ = (call);                                          \
    if (noeira_cuda_status_ != cudaSuccess) {                                                \
      throw ::noeira::LibraryError(::noeira::detail::concat(                                 \
          #call, " failed: ", cudaGetErrorName(noeira_cuda_status_), " (",                    \
          cudaGetErrorString(noeira_cuda_status_), ") at ", __FILE__, ":", __LINE__));        \
    }                                                                                        \
  } while (0)

#define CUBLAS_CHECK(call)                                                                   \
  do {                                                                                       \
    const cublasStatus_t noeira_cublas_status_ = (call);                                     \
    if (noeira_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                    \
      throw ::noeira::LibraryError(::noeira::detail::concat(                                 \
          #call, " failed: ", cublasLtGetStatusString(noeira_cublas_status_), " at ",        \
          __FILE__, ":", __LINE__));                                                         \
    }                                                                                        \
  } while (0)

namespace noeira::cuda {

// The opaque table stream as the runtime's type (nullptr is the legacy default stream).
inline cudaStream_t as_cuda(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace noeira::cuda
