#pragma once
// Block-wide reductions with a fixed combination order (butterfly shuffles within a warp, then
// the warp results in warp order), so a result depends only on the data and blockDim, never on
// scheduling. blockDim.x must be a multiple of 32 and at most 1024; every thread must call.
#include <cuda_runtime.h>

#include <cstdint>

namespace noeira::cuda {

struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <class T, class Op>
__device__ T warp_reduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Returns the reduction of v over the block to every thread.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T partial[32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  v = warp_reduce(v, op);
  __syncthreads();  // partial may still be read by a previous call's broadcast
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : identity;
  v = warp_reduce(v, op);
  return v;
}

template <class T>
__device__ T block_sum(T v) {
  return block_reduce(v, SumOp{}, T(0));
}

__device__ inline float block_max(float v) { return block_reduce(v, MaxOp{}, -INFINITY); }

// The most threads a row-wise kernel's block has, and so its __launch_bounds__: without a bound
// ptxas may give a thread up to 255 registers, and a 512-thread block then fails to launch
// (65536 registers per block; docs/design.md, "CUDA: launch bounds and reproducible library
// choices").
constexpr int kMaxRowThreads = 512;

// Threads per block for a row-wise kernel over `cols` elements: one warp for short rows, up to
// kMaxRowThreads for long ones.
inline int row_threads(std::int64_t cols) {
  int t = 32;
  while (t < kMaxRowThreads && t < cols) t *= 2;
  return t;
}

}  // namespace noeira::cuda
