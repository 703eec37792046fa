// Batch normalization on CUDA: one block per channel for the per-channel sums (double, block
// reductions in a fixed order, so the sums depend on the data and the launch geometry only),
// element-wise maps for the rest. The formulas are kernels/batchnorm_math.hpp's, as on the CPU.
#include "kernels/batchnorm_math.hpp"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"

namespace noeira::cuda {

namespace {

constexpr int kChannelThreads = 256;

// Σx and Σx² of channel blockIdx.x over every row and pixel.
__global__ void __launch_bounds__(kChannelThreads)
    moments_kernel(double* moments, const float* x, std::int64_t rows, std::int64_t channels,
                   std::int64_t pixels) {
  const std::int64_t c = blockIdx.x;
  const std::int64_t n = rows * pixels;
  double s = 0.0;
  double sq = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const std::int64_t r = i / pixels;
    const double v = x[(r * channels + c) * pixels + i % pixels];
    s += v;
    sq += v * v;
  }
  s = block_sum(s);
  sq = block_sum(sq);
  if (threadIdx.x == 0) {
    moments[c] = s;
    moments[channels + c] = sq;
  }
}

__global__ void __launch_bounds__(kChannelThreads)
    grad_sums_kernel(double* sums, const float* dy, const float* x, const float* mean,
                     const float* rstd, std::int64_t rows, std::int64_t channels,
                     std::int64_t pixels) {
  const std::int64_t c = blockIdx.x;
  const std::int64_t n = rows * pixels;
  const float m = mean[c];
  const float rs = rstd[c];
  double sum_dy = 0.0;
  double sum_dy_xhat = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const std::int64_t o = (i / pixels * channels + c) * pixels + i % pixels;
    const float xhat = __fmul_rn(__fsub_rn(x[o], m), rs);
    sum_dy += dy[o];
    sum_dy_xhat += static_cast<double>(dy[o]) * xhat;
  }
  sum_dy = block_sum(sum_dy);
  sum_dy_xhat = block_sum(sum_dy_xhat);
  if (threadIdx.x == 0) {
    sums[c] = sum_dy;
    sums[channels + c] = sum_dy_xhat;
  }
}

// The element-wise steps, as functors for the shared launcher.
struct ZeroMoments {
  double* moments;
  __device__ void operator()(std::int64_t i) const { moments[i] = 0.0; }
};

struct SetCount {
  double* slot;
  double count;
  __device__ void operator()(std::int64_t) const { *slot = count; }
};

struct RunningStatistics {
  float* mean;
  float* rstd;
  const float* running_mean;
  const float* running_var;
  float eps;
  __device__ void operator()(std::int64_t c) const {
    mean[c] = running_mean[c];
    rstd[c] = batchnorm::running_rstd(running_var[c], eps);
  }
};

struct BatchStatistics {
  float* mean;
  float* rstd;
  float* running_mean;
  float* running_var;
  float* batches_tracked;
  const double* moments;
  std::int64_t channels;
  float eps;
  float momentum;
  bool update_running;
  __device__ void operator()(std::int64_t c) const {
    const double count = moments[2 * channels];
    const batchnorm::ChannelStats s =
        batchnorm::channel_stats(moments[c], moments[channels + c], count, eps);
    mean[c] = s.mean;
    rstd[c] = s.rstd;
    if (update_running && count > 0.0) {
      running_mean[c] = batchnorm::running_update(running_mean[c], s.mean, momentum);
      running_var[c] = batchnorm::running_update(running_var[c], s.unbiased_var, momentum);
      if (c == 0) batches_tracked[0] += 1.0f;
    }
  }
};

struct Normalize {
  float* y;
  const float* x;
  const float* mean;
  const float* rstd;
  const float* gamma;
  const float* beta;
  std::int64_t channels;
  std::int64_t pixels;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t c = i / pixels % channels;
    // Rounded operations in the CPU kernel's order (no contraction into fused multiply-adds).
    y[i] = __fadd_rn(__fmul_rn(__fsub_rn(x[i], mean[c]), __fmul_rn(rstd[c], gamma[c])), beta[c]);
  }
};

struct ParamGrads {
  float* dgamma;
  float* dbeta;
  const double* local_sums;
  std::int64_t channels;
  bool accumulate;
  __device__ void operator()(std::int64_t c) const {
    const float dg = static_cast<float>(local_sums[channels + c]);
    const float db = static_cast<float>(local_sums[c]);
    dgamma[c] = accumulate ? dgamma[c] + dg : dg;
    dbeta[c] = accumulate ? dbeta[c] + db : db;
  }
};

struct BatchNormInputGrad {
  float* dx;
  const double* batch_sums;
  const double* moments;
  const float* dy;
  const float* x;
  const float* mean;
  const float* rstd;
  const float* gamma;
  std::int64_t channels;
  std::int64_t pixels;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t c = i / pixels % channels;
    const double count = moments[2 * channels];
    const float mean_dy = count > 0.0 ? static_cast<float>(batch_sums[c] / count) : 0.0f;
    const float mean_dy_xhat =
        count > 0.0 ? static_cast<float>(batch_sums[channels + c] / count) : 0.0f;
    const float xhat = __fmul_rn(__fsub_rn(x[i], mean[c]), rstd[c]);
    dx[i] = batchnorm::input_grad(dy[i], xhat, gamma[c], rstd[c], mean_dy, mean_dy_xhat);
  }
};

}  // namespace

void batchnorm_moments(Stream stream, double* moments, const float* x, bool counted,
                       std::int64_t rows, std::int64_t channels, std::int64_t pixels) {
  if (!counted || rows * pixels == 0) {
    launch_map(stream, batchnorm::moments_size(channels), ZeroMoments{moments});
    return;
  }
  moments_kernel<<<static_cast<unsigned>(channels), kChannelThreads, 0, as_cuda(stream)>>>(
      moments, x, rows, channels, pixels);
  check_launch();
  launch_map(stream, 1, SetCount{moments + 2 * channels, static_cast<double>(rows * pixels)});
}

void batchnorm_statistics(Stream stream, BatchNormSource source, float* mean, float* rstd,
                          float* running_mean, float* running_var, float* batches_tracked,
                          const double* moments, std::int64_t channels, float eps, float momentum,
                          bool update_running) {
  if (source == BatchNormSource::Running) {
    launch_map(stream, channels, RunningStatistics{mean, rstd, running_mean, running_var, eps});
    return;
  }
  launch_map(stream, channels,
             BatchStatistics{mean, rstd, running_mean, running_var, batches_tracked, moments,
                             channels, eps, momentum, update_running});
}

void batchnorm_forward(Stream stream, float* y, const float* x, const float* mean,
                       const float* rstd, const float* gamma, const float* beta,
                       std::int64_t rows, std::int64_t channels, std::int64_t pixels) {
  launch_map(stream, rows * channels * pixels,
             Normalize{y, x, mean, rstd, gamma, beta, channels, pixels});
}

void batchnorm_grad_sums(Stream stream, double* grad_sums, const float* dy, const float* x,
                         const float* mean, const float* rstd, std::int64_t rows,
                         std::int64_t channels, std::int64_t pixels) {
  grad_sums_kernel<<<static_cast<unsigned>(channels), kChannelThreads, 0, as_cuda(stream)>>>(
      grad_sums, dy, x, mean, rstd, rows, channels, pixels);
  check_launch();
}

void batchnorm_backward(Stream stream, GradMode mode, float* dx, float* dgamma, float* dbeta,
                        const double* local_sums, const double* batch_sums, const double* moments,
                        const float* dy, const float* x, const float* mean, const float* rstd,
                        const float* gamma, std::int64_t rows, std::int64_t channels,
                        std::int64_t pixels) {
  launch_map(stream, channels,
             ParamGrads{dgamma, dbeta, local_sums, channels, mode == GradMode::Accumulate});
  if (dx == nullptr) return;
  launch_map(stream, rows * channels * pixels,
             BatchNormInputGrad{dx, batch_sums, moments, dy, x, mean, rstd, gamma, channels,
                                pixels});
}

}  // namespace noeira::cuda
