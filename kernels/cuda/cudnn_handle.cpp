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

}  // namespace

cudnnHandle_t cudnn_handle(Stream stream) {
  thread_local ThreadHandles state;
  const cudnnHandle_t handle = handle_for(state.handles, current_device(),
                                          [](cudnnHandle_t* h) { CUDNN_CHECK(cudnnCreate(h)); });
  CUDNN_CHECK(cudnnSetStream(handle, as_cuda(stream)));
  return handle;
}

}  // namespace noeira::cuda
