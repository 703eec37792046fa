// Device memory. Copies are ordered on the caller's stream; upload and download also wait for
// their copy, because callers hand in host buffers they free or read right after the call
// (Tensor::copy_from, Tensor::to_vector, the initializers).
#include <cstdio>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/cudnn_handle.hpp"
#include "kernels/cuda/handles.hpp"

// The simulated ranks' streams are ordered with the legacy default stream, on which the simulated
// world's collectives, uploads and downloads run (distributed/rank_stream.hpp): a per-thread
// default stream would remove that ordering without a word.
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "noeira's CUDA plugin relies on the legacy default stream: build without per-thread streams"
#endif

namespace noeira::cuda {

void* allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure is not sticky; do not poison later calls
    throw LibraryError(detail::concat("cudaMalloc of ", bytes, " bytes failed: ",
                                      cudaGetErrorString(status)));
  }
  return p;
}

void release(void* ptr) {
  if (ptr == nullptr) return;
  // Called from destructors, so it must not throw. At process exit the runtime may already be
  // unloaded when static tensors die; that is harmless and stays silent.
  const cudaError_t status = cudaFree(ptr);
  if (status != cudaSuccess && status != cudaErrorCudartUnloading) {
    std::fprintf(stderr, "noeira: cudaFree failed: %s\n", cudaGetErrorString(status));
  }
}

void upload(Stream stream, void* dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, as_cuda(stream)));
  // The caller may free or overwrite host_src as soon as we return.
  CUDA_CHECK(cudaStreamSynchronize(as_cuda(stream)));
}

void download(Stream stream, void* host_dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, as_cuda(stream)));
  // The caller reads host_dst as soon as we return.
  CUDA_CHECK(cudaStreamSynchronize(as_cuda(stream)));
}

// Unlike the CPU's memmove, overlapping (but unequal) ranges are not allowed: cudaMemcpy's rule.
void copy_bytes(Stream stream, void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_cuda(stream)));
}

void synchronize(Stream stream) { CUDA_CHECK(cudaStreamSynchronize(as_cuda(stream))); }

// cudaStreamCreate (not ...WithFlags(cudaStreamNonBlocking)): a blocking stream keeps the legacy
// default stream's implicit ordering, which the simulated world relies on.
Stream create_stream() {
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreate(&s));
  return s;
}

void destroy_stream(Stream stream) {
  if (stream == nullptr) return;
  // The workspace this thread's matrix products used on the stream (kernels/cuda/handles.hpp).
  // cudaFree waits for the device, so no product of the stream still uses it. And this thread's
  // cuDNN handle lets go of the stream (kernels/cuda/cudnn_handle.hpp).
  release_lt_workspace(stream);
  unbind_cudnn_stream(stream);
  // Called from destructors: report, never throw.
  const cudaError_t status = cudaStreamDestroy(as_cuda(stream));
  if (status != cudaSuccess && status != cudaErrorCudartUnloading) {
    std::fprintf(stderr, "noeira: cudaStreamDestroy failed: %s\n", cudaGetErrorString(status));
  }
}

}  // namespace noeira::cuda
