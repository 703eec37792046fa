#include "kernels/cuda/cudnn_handle.hpp"

#include <map>

#include "kernels/cuda/per_device.hpp"

namespace noeira::cuda {

namespace {

// One handle per device (per_device.hpp).
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

ThreadHandles& thread_handles() {
  thread_local ThreadHandles state;
  return state;
}

}  // namespace

cudnnHandle_t cudnn_handle(Stream stream) {
  const cudnnHandle_t handle = handle_for(thread_handles().handles, current_device(),
                                          [](cudnnHandle_t* h) { CUDNN_CHECK(cudnnCreate(h)); });
  CUDNN_CHECK(cudnnSetStream(handle, as_cuda(stream)));
  return handle;
}

void unbind_cudnn_stream(Stream stream) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  const auto& handles = thread_handles().handles;
  const auto it = handles.find(device);
  if (it == handles.end()) return;
  cudaStream_t bound = nullptr;
  if (cudnnGetStream(it->second, &bound) == CUDNN_STATUS_SUCCESS && bound == as_cuda(stream)) {
    (void)cudnnSetStream(it->second, nullptr);
  }
}

}  // namespace noeira::cuda
