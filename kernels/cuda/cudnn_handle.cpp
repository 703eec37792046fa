#include "kernels/cuda/cudnn_handle.hpp"

#include <map>

namespace noeira::cuda {

namespace {

// One handle per device: a handle is tied to the device current at its creation.
struct ThreadHandles {
  std::map<int, cudnnHandle_t> handles;

  ThreadHandles() = default;
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;
  // At thread exit, possibly after the CUDA runtime is gone: nothing thrown.
  ~ThreadHandles() {
    for (auto& [device, handle] : handles) (void)cudnnDestroy(handle);
  }
};

}  // namespace

cudnnHandle_t cudnn_handle(Stream stream) {
  thread_local ThreadHandles state;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  auto [it, inserted] = state.handles.try_emplace(device, nullptr);
  if (inserted) {
    const cudnnStatus_t status = cudnnCreate(&it->second);
    if (status != CUDNN_STATUS_SUCCESS) {
      state.handles.erase(it);
      CUDNN_CHECK(status);
    }
  }
  CUDNN_CHECK(cudnnSetStream(it->second, as_cuda(stream)));
  return it->second;
}

}  // namespace noeira::cuda
