#pragma once
// Short-lived device scratch (reduction partials) from the stream-ordered allocator: after the
// pool warms up, cudaMallocAsync/cudaFreeAsync cost no device synchronization, and the free is
// ordered after the kernels that use the buffer on the same stream.
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "kernels/cuda/check.hpp"

namespace noeira::cuda {

// The default pool hands its memory back to the driver at every synchronization unless its
// release threshold says to keep it: keep it, so that scratch really is reused. Once per thread
// and device (cheap to ask, and a thread may move between devices).
inline void keep_pool_memory() {
  thread_local int done_for = -1;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  if (device == done_for) return;
  cudaMemPool_t pool = nullptr;
  CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  std::uint64_t keep = UINT64_MAX;
  CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  done_for = device;
}

template <class T>
class Scratch {
 public:
  Scratch(void* stream, std::size_t count) : stream_(as_cuda(stream)) {
    if (count == 0) return;
    keep_pool_memory();
    CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&data_), count * sizeof(T), stream_));
  }
  ~Scratch() {
    if (data_ == nullptr) return;
    // Destructors must not throw; a failure here means an earlier error already surfaced.
    const cudaError_t status = cudaFreeAsync(data_, stream_);
    if (status != cudaSuccess && status != cudaErrorCudartUnloading) {
      std::fprintf(stderr, "noeira: cudaFreeAsync failed: %s\n", cudaGetErrorString(status));
    }
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  T* data() { return data_; }

 private:
  cudaStream_t stream_;
  T* data_ = nullptr;
};

}  // namespace noeira::cuda
