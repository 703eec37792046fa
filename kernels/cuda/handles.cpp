#include "kernels/cuda/handles.hpp"

#include <cstdio>
#include <map>
#include <utility>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/per_device.hpp"

namespace noeira::cuda {

namespace {

// Frees a workspace; called at stream destruction and thread exit (possibly after the CUDA
// runtime is gone at process exit): errors are reported, never thrown.
void free_workspace(void* ptr) {
  const cudaError_t status = cudaFree(ptr);
  if (status != cudaSuccess && status != cudaErrorCudartUnloading) {
    std::fprintf(stderr, "noeira: freeing a cuBLASLt workspace failed: %s\n",
                 cudaGetErrorString(status));
  }
}

// Keyed by device as well: a handle is tied to its device (per_device.hpp), and the legacy
// default stream has the same handle value on every device.
struct ThreadState {
  std::map<int, cublasLtHandle_t> handles;
  std::map<std::pair<int, cudaStream_t>, void*> workspaces;

  ThreadState() = default;
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;

  ~ThreadState() {
    for (auto& [key, ptr] : workspaces) free_workspace(ptr);
    for (auto& [device, handle] : handles) (void)cublasLtDestroy(handle);
  }
};

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

}  // namespace

LtContext lt_context(Stream stream) {
  ThreadState& st = thread_state();
  const int device = current_device();
  const cublasLtHandle_t handle = handle_for(
      st.handles, device, [](cublasLtHandle_t* h) { CUBLAS_CHECK(cublasLtCreate(h)); });
  auto [it, inserted] = st.workspaces.try_emplace({device, as_cuda(stream)}, nullptr);
  if (inserted) {
    const cudaError_t status = cudaMalloc(&it->second, kLtWorkspaceBytes);
    if (status != cudaSuccess) {
      st.workspaces.erase(it);
      (void)cudaGetLastError();
      throw LibraryError(detail::concat("cudaMalloc of the ", kLtWorkspaceBytes,
                                        "-byte cuBLASLt workspace failed: ",
                                        cudaGetErrorString(status)));
    }
  }
  return LtContext{handle, it->second, kLtWorkspaceBytes};
}

void release_lt_workspace(Stream stream) {
  ThreadState& st = thread_state();
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  const auto it = st.workspaces.find({device, as_cuda(stream)});
  if (it == st.workspaces.end()) return;
  free_workspace(it->second);
  st.workspaces.erase(it);
}

}  // namespace noeira::cuda
