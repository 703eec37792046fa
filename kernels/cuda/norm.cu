// LayerNorm and RMSNorm on CUDA, one skeleton for both (RMSNorm: mean and beta null, as on the
// CPU): one block per row for the row statistics and the input gradient (sums in double as on
// the CPU, block reductions in a fixed order), deterministic column sums for the gamma and beta
// gradients. The element formulas are in kernels/norm_math.hpp.
#include "kernels/bf16_math.hpp"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/colsum.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/norm_math.hpp"

namespace noeira::cuda {

namespace {

// y as fp32 values (Y float) or as their bfloat16 bits (Y std::uint16_t).
__device__ void store_value(float* y, float v) { *y = v; }
__device__ void store_value(std::uint16_t* y, float v) { *y = bf16_bits(v); }

// mean is null for RMSNorm (no centring: the row mean is taken as 0), beta null for no shift.
template <class Y>
__global__ void __launch_bounds__(kMaxRowThreads)
    norm_forward_kernel(Y* y, float* mean, float* rstd, const float* x, const float* gamma,
                        const float* beta, std::int64_t cols, float eps) {
  const std::int64_t r = blockIdx.x;
  const float* xr = x + r * cols;
  Y* yr = y + r * cols;
  float m = 0.0f;
  if (mean != nullptr) {
    // Two passes (mean, then squared deviations): no cancellation for rows with a large mean.
    double s = 0.0;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    m = static_cast<float>(block_sum(s) / static_cast<double>(cols));
  }
  double sq = 0.0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const double d = static_cast<double>(xr[c]) - m;
    sq += d * d;
  }
  const float rs = norm::rstd(static_cast<float>(block_sum(sq) / static_cast<double>(cols)), eps);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = (xr[c] - m) * rs * gamma[c];
    store_value(yr + c, beta != nullptr ? v + beta[c] : v);
  }
  if (threadIdx.x == 0) {
    if (mean != nullptr) mean[r] = m;
    rstd[r] = rs;
  }
}

// dx for one row. mean is null for RMSNorm (no centring, no mean(g) term).
__global__ void __launch_bounds__(kMaxRowThreads)
    norm_input_grad_kernel(float* dx, const float* dy, const float* x, const float* gamma,
                           const float* mean, const float* rstd, std::int64_t cols) {
  const std::int64_t r = blockIdx.x;
  const std::int64_t o = r * cols;
  const float m = mean != nullptr ? mean[r] : 0.0f;
  const float rs = rstd[r];
  double sum_g = 0.0;
  double sum_g_xhat = 0.0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    // Rounded products (no fused multiply-add): mean_g is then the mean of exactly the values
    // the second loop subtracts it from, as on the CPU (at one column dx is exactly 0).
    const float g = __fmul_rn(dy[o + c], gamma[c]);
    sum_g += g;
    sum_g_xhat += static_cast<double>(g) * ((x[o + c] - m) * rs);
  }
  const double inv_cols = 1.0 / static_cast<double>(cols);
  const float mean_g = mean != nullptr ? static_cast<float>(block_sum(sum_g) * inv_cols) : 0.0f;
  const float mean_g_xhat = static_cast<float>(block_sum(sum_g_xhat) * inv_cols);
  // The reductions' barriers put every read of the row before any write of dx.
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    dx[o + c] = norm::input_grad(__fmul_rn(dy[o + c], gamma[c]), (x[o + c] - m) * rs, rs, mean_g,
                                 mean_g_xhat);
  }
}

// dy · xhat, the gamma gradient's term; mean is null for RMSNorm.
struct GammaTerm {
  const float* dy;
  const float* x;
  const float* mean;
  const float* rstd;
  std::int64_t cols;
  __device__ double operator()(std::int64_t r, std::int64_t c) const {
    const float m = mean != nullptr ? mean[r] : 0.0f;
    const float xhat = (x[r * cols + c] - m) * rstd[r];
    return static_cast<double>(dy[r * cols + c]) * xhat;
  }
};

struct BetaTerm {
  const float* dy;
  std::int64_t cols;
  __device__ float operator()(std::int64_t r, std::int64_t c) const { return dy[r * cols + c]; }
};

}  // namespace

void norm_forward_typed(Stream s, void* y, DType y_dtype, float* mean, float* rstd,
                        const float* x, const float* gamma, const float* beta, std::int64_t rows,
                        std::int64_t cols, float eps) {
  if (rows <= 0 || cols <= 0) return;
  const dim3 grid(static_cast<unsigned>(rows));
  if (y_dtype == DType::BF16) {
    norm_forward_kernel<<<grid, row_threads(cols), 0, as_cuda(s)>>>(
        static_cast<std::uint16_t*>(y), mean, rstd, x, gamma, beta, cols, eps);
  } else {
    norm_forward_kernel<<<grid, row_threads(cols), 0, as_cuda(s)>>>(
        static_cast<float*>(y), mean, rstd, x, gamma, beta, cols, eps);
  }
  check_launch();
}

void norm_backward(Stream s, GradMode mode, float* dx, float* dgamma, float* dbeta,
                   const float* dy, const float* x, const float* gamma, const float* mean,
                   const float* rstd, std::int64_t rows, std::int64_t cols) {
  // Parameter gradients first: dgamma = Σ_rows dy · xhat, dbeta = Σ_rows dy.
  column_sums(s, mode, dgamma, rows, cols, GammaTerm{dy, x, mean, rstd, cols});
  if (dbeta != nullptr) column_sums(s, mode, dbeta, rows, cols, BetaTerm{dy, cols});
  if (dx == nullptr || rows <= 0 || cols <= 0) return;
  norm_input_grad_kernel<<<static_cast<unsigned>(rows), row_threads(cols), 0, as_cuda(s)>>>(
      dx, dy, x, gamma, mean, rstd, cols);
  check_launch();
}

}  // namespace noeira::cuda
