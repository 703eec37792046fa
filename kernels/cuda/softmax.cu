// Softmax over the last dimension: one block per row, the row's max and sum as block reductions
// (the sum in double, as on the CPU), so each row's result depends only on its data and length.
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"

namespace noeira::cuda {

namespace {

__global__ void softmax_forward_kernel(float* y, const float* x, std::int64_t cols) {
  const float* xr = x + static_cast<std::int64_t>(blockIdx.x) * cols;
  float* yr = y + static_cast<std::int64_t>(blockIdx.x) * cols;
  // Subtracting the row max keeps exp() from overflowing; the result is unchanged.
  float max = -INFINITY;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) max = fmaxf(max, xr[c]);
  max = block_max(max);
  double total = 0.0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float e = expf(xr[c] - max);
    yr[c] = e;
    total += e;
  }
  total = block_sum(total);
  const float inv = static_cast<float>(1.0 / total);
  // Each thread rescales only the elements it wrote itself: no barrier needed.
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] *= inv;
}

__global__ void softmax_backward_kernel(float* dx, const float* dy, const float* y,
                                        std::int64_t cols) {
  const std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * cols;
  double dot = 0.0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    dot += static_cast<double>(dy[o + c]) * y[o + c];
  }
  // The block reduction's barriers put every read of dy before any write of dx: dx may alias dy.
  const float d = static_cast<float>(block_sum(dot));
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    dx[o + c] = y[o + c] * (dy[o + c] - d);
  }
}

}  // namespace

void softmax_forward(Stream s, float* y, const float* x, std::int64_t rows, std::int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  softmax_forward_kernel<<<static_cast<unsigned>(rows), row_threads(cols), 0, as_cuda(s)>>>(
      y, x, cols);
  check_launch();
}

void softmax_backward(Stream s, float* dx, const float* dy, const float* y, std::int64_t rows,
                      std::int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  softmax_backward_kernel<<<static_cast<unsigned>(rows), row_threads(cols), 0, as_cuda(s)>>>(
      dx, dy, y, cols);
  check_launch();
}

}  // namespace noeira::cuda
