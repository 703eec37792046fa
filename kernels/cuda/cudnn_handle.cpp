#include "kernels/cuda/cudnn_handle.hpp"

namespace noeira::cuda {

namespace {

struct ThreadHandle {
  cudnnHandle_t handle = nullptr;

  ThreadHandle() = default;
  ThreadHandle(const ThreadHandle&) = delete;
  ThreadHandle& operator=(const ThreadHandle&) = delete;
  // At thread exit, possibly after the CUDA runtime is gone: nothing thrown.
  ~ThreadHandle() {
    if (handle != nullptr) (void)cudnnDestroy(handle);
  }
};

}  // namespace

cudnnHandle_t cudnn_handle(Stream stream) {
  thread_local ThreadHandle state;
  if (state.handle == nullptr) CUDNN_CHECK(cudnnCreate(&state.handle));
  CUDNN_CHECK(cudnnSetStream(state.handle, as_cuda(stream)));
  return state.handle;
}

}  // namespace noeira::cuda
