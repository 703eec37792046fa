#include "kernels/cuda/handles.hpp"

#include <cstdio>
#include <unordered_map>

#include "kernels/cuda/check.hpp"

namespace noeira::cuda {

namespace {

struct ThreadState {
  cublasLtHandle_t handle = nullptr;
  std::unordered_map<cudaStream_t, void*> workspaces;

  ThreadState() = default;
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;

  // Runs at thread exit, possibly after the CUDA runtime is gone at process exit: errors are
  // reported, never thrown.
  ~ThreadState() {
    for (auto& [stream, ptr] : workspaces) {
      const cudaError_t status = cudaFree(ptr);
      if (status != cudaSuccess && status != cudaErrorCudartUnloading) {
        std::fprintf(stderr, "noeira: freeing a cuBLASLt workspace failed: %s\n",
                     cudaGetErrorString(status));
      }
    }
    if (handle != nullptr) (void)cublasLtDestroy(handle);
  }
};

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

}  // namespace

LtContext lt_context(Stream stream) {
  ThreadState& st = thread_state();
  if (st.handle == nullptr) CUBLAS_CHECK(cublasLtCreate(&st.handle));
  auto [it, inserted] = st.workspaces.try_emplace(as_cuda(stream), nullptr);
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
  return LtContext{st.handle, it->second, kLtWorkspaceBytes};
}

}  // namespace noeira::cuda
