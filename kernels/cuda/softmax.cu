// Softmax on CUDA, over the last dimension and over attention scores (a masked softmax over a
// visible prefix of each row): one block per row, the row's max and sum as block reductions (the
// sum in double, as on the CPU), so each row's result depends only on its data and length.
#include "kernels/activation_math.hpp"
#include "kernels/attention_math.hpp"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"

namespace noeira::cuda {

namespace {

// How many leading entries of a row take part: all of them, or what an attention mask shows.
struct WholeRow {
  std::int64_t cols;
  __device__ std::int64_t operator()(std::int64_t) const { return cols; }
};

struct VisibleKeys {
  AttentionMask mask;
  std::int64_t heads, tq, tk;
  __device__ std::int64_t operator()(std::int64_t row) const {
    return attn::visible_keys(mask, row, heads, tq, tk);
  }
};

// y[0:n] = softmax(x[0:n]), y[n:cols] = 0 for every row. Each thread writes only the elements it
// read itself, after the max's barrier: y may alias x.
template <class Visible>
__global__ void __launch_bounds__(kMaxRowThreads)
    softmax_forward_kernel(float* y, const float* x, std::int64_t cols, Visible visible) {
  const std::int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  const std::int64_t n = visible(row);
  // Subtracting the row max keeps exp() from overflowing; the result is unchanged.
  float max = -INFINITY;
  for (std::int64_t c = threadIdx.x; c < n; c += blockDim.x) max = fmaxf(max, xr[c]);
  max = block_max(max);
  double total = 0.0;
  for (std::int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    // The CPU's flush: exactly 0 below e^-87.3 (the smallest normal float), not a denormal.
    const float e = act::exp_nonpositive(xr[c] - max);
    yr[c] = e;
    total += e;
  }
  total = block_sum(total);
  const float inv = n > 0 ? static_cast<float>(1.0 / total) : 0.0f;
  // Each thread rescales only the elements it wrote itself: no barrier needed.
  for (std::int64_t c = threadIdx.x; c < n; c += blockDim.x) yr[c] *= inv;
  for (std::int64_t c = n + threadIdx.x; c < cols; c += blockDim.x) yr[c] = 0.0f;
}

template <class Visible>
void launch_softmax(Stream s, float* y, const float* x, std::int64_t rows, std::int64_t cols,
                    Visible visible) {
  if (rows <= 0 || cols <= 0) return;
  softmax_forward_kernel<<<static_cast<unsigned>(rows), row_threads(cols), 0, as_cuda(s)>>>(
      y, x, cols, visible);
  check_launch();
}

__global__ void __launch_bounds__(kMaxRowThreads)
    softmax_backward_kernel(float* dx, const float* dy, const float* y, std::int64_t cols) {
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
  launch_softmax(s, y, x, rows, cols, WholeRow{cols});
}

void masked_softmax_forward(Stream s, float* y, const float* x, AttentionMask mask,
                            std::int64_t batch, std::int64_t heads, std::int64_t tq,
                            std::int64_t tk) {
  launch_softmax(s, y, x, batch * heads * tq, tk, VisibleKeys{mask, heads, tq, tk});
}

void softmax_backward(Stream s, float* dx, const float* dy, const float* y, std::int64_t rows,
                      std::int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  softmax_backward_kernel<<<static_cast<unsigned>(rows), row_threads(cols), 0, as_cuda(s)>>>(
      dx, dy, y, cols);
  check_launch();
}

}  // namespace noeira::cuda
