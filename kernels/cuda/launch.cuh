#pragma once
// The one element-wise launcher: a grid-stride loop that calls a functor for every index. Each
// element-wise kernel of the backend is a small functor over this loop, so launch geometry,
// 64-bit indexing and launch-error checks live here once.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/check.hpp"
#include "kernels/target.hpp"

namespace noeira::cuda {

constexpr int kMapThreads = 256;
// Enough resident blocks to fill any current GPU; the grid-stride loop covers the rest.
constexpr std::int64_t kMaxMapBlocks = 65536;

// Like every kernel of the backend, bounded by the largest block its launch uses, which keeps
// ptxas's register budget within what that block may have (docs/design.md, "CUDA: launch bounds
// and reproducible library choices"); a launch past the bound fails in check_launch.
template <class F>
__global__ void __launch_bounds__(kMapThreads) map_kernel(std::int64_t n, F f) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    f(i);
  }
}

// Calls f(i) for i in [0, n) on the stream. f is a trivially copyable functor with a
// __device__ operator()(std::int64_t).
template <class F>
void launch_map(Stream stream, std::int64_t n, F f) {
  if (n <= 0) return;
  const std::int64_t blocks = std::min((n + kMapThreads - 1) / kMapThreads, kMaxMapBlocks);
  map_kernel<<<static_cast<unsigned>(blocks), kMapThreads, 0, as_cuda(stream)>>>(n, f);
  CUDA_CHECK(cudaGetLastError());
}

// Launch check for the hand-written (row-wise, reduction) kernels.
inline void check_launch() { CUDA_CHECK(cudaGetLastError()); }

}  // namespace noeira::cuda
