// LayerNorm and RMSNorm on the CPU. Row statistics are summed in double, one row per iteration;
// gamma and beta gradients are summed over rows in row order (column blocks in parallel), so
// nothing depends on the thread count. The element formulas are in kernels/norm_math.hpp.
#include <cmath>

#include "kernels/cpu/column_sum.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/norm_math.hpp"

namespace noeira::cpu {

void layernorm_forward(Stream, float* y, float* mean, float* rstd, const float* x,
                       const float* gamma, const float* beta, std::int64_t rows,
                       std::int64_t cols, float eps) {
  parallel_for_rows(rows, cols, [&](std::int64_t r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    // Two passes (mean, then squared deviations): no cancellation for rows with a large mean.
    double s = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) s += xr[c];
    const float m = static_cast<float>(s / static_cast<double>(cols));
    double sq = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const double d = static_cast<double>(xr[c]) - m;
      sq += d * d;
    }
    const float rs = norm::rstd(static_cast<float>(sq / static_cast<double>(cols)), eps);
    for (std::int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - m) * rs * gamma[c] + beta[c];
    mean[r] = m;
    rstd[r] = rs;
  });
}

void layernorm_backward(Stream, GradMode mode, float* dx, float* dgamma, float* dbeta,
                        const float* dy, const float* x, const float* gamma, const float* mean,
                        const float* rstd, std::int64_t rows, std::int64_t cols) {
  // Parameter gradients first: dgamma = Σ_rows dy · xhat, dbeta = Σ_rows dy.
  parallel_for_column_blocks(rows, cols, [&](std::int64_t c0, std::int64_t c1) {
    double sg[kColumnBlock] = {};
    double sb[kColumnBlock] = {};
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* dyr = dy + r * cols;
      const float* xr = x + r * cols;
      for (std::int64_t c = c0; c < c1; ++c) {
        const float xhat = (xr[c] - mean[r]) * rstd[r];
        sg[c - c0] += static_cast<double>(dyr[c]) * xhat;
        sb[c - c0] += dyr[c];
      }
    }
    for (std::int64_t c = c0; c < c1; ++c) {
      const float g = static_cast<float>(sg[c - c0]);
      const float b = static_cast<float>(sb[c - c0]);
      dgamma[c] = mode == GradMode::Accumulate ? dgamma[c] + g : g;
      dbeta[c] = mode == GradMode::Accumulate ? dbeta[c] + b : b;
    }
  });
  if (dx == nullptr) return;
  parallel_for_rows(rows, cols, [&](std::int64_t r) {
    const float* dyr = dy + r * cols;
    const float* xr = x + r * cols;
    float* dxr = dx + r * cols;
    const float m = mean[r];
    const float rs = rstd[r];
    double sum_g = 0.0;
    double sum_g_xhat = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float g = dyr[c] * gamma[c];
      sum_g += g;
      sum_g_xhat += static_cast<double>(g) * ((xr[c] - m) * rs);
    }
    const float mean_g = static_cast<float>(sum_g / static_cast<double>(cols));
    const float mean_g_xhat = static_cast<float>(sum_g_xhat / static_cast<double>(cols));
    for (std::int64_t c = 0; c < cols; ++c) {
      dxr[c] = norm::input_grad(dyr[c] * gamma[c], (xr[c] - m) * rs, rs, mean_g, mean_g_xhat);
    }
  });
}

void rmsnorm_forward(Stream, float* y, float* rstd, const float* x, const float* gamma,
                     std::int64_t rows, std::int64_t cols, float eps) {
  parallel_for_rows(rows, cols, [&](std::int64_t r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    double sq = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) sq += static_cast<double>(xr[c]) * xr[c];
    const float rs = norm::rstd(static_cast<float>(sq / static_cast<double>(cols)), eps);
    for (std::int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * rs * gamma[c];
    rstd[r] = rs;
  });
}

void rmsnorm_backward(Stream, GradMode mode, float* dx, float* dgamma, const float* dy,
                      const float* x, const float* gamma, const float* rstd, std::int64_t rows,
                      std::int64_t cols) {
  parallel_for_column_blocks(rows, cols, [&](std::int64_t c0, std::int64_t c1) {
    double sg[kColumnBlock] = {};
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* dyr = dy + r * cols;
      const float* xr = x + r * cols;
      for (std::int64_t c = c0; c < c1; ++c) {
        sg[c - c0] += static_cast<double>(dyr[c]) * (xr[c] * rstd[r]);
      }
    }
    for (std::int64_t c = c0; c < c1; ++c) {
      const float g = static_cast<float>(sg[c - c0]);
      dgamma[c] = mode == GradMode::Accumulate ? dgamma[c] + g : g;
    }
  });
  if (dx == nullptr) return;
  parallel_for_rows(rows, cols, [&](std::int64_t r) {
    const float* dyr = dy + r * cols;
    const float* xr = x + r * cols;
    float* dxr = dx + r * cols;
    const float rs = rstd[r];
    double sum_g_xhat = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) {
      sum_g_xhat += static_cast<double>(dyr[c] * gamma[c]) * (xr[c] * rs);
    }
    const float mean_g_xhat = static_cast<float>(sum_g_xhat / static_cast<double>(cols));
    for (std::int64_t c = 0; c < cols; ++c) {
      dxr[c] = norm::input_grad(dyr[c] * gamma[c], xr[c] * rs, rs, 0.0f, mean_g_xhat);
    }
  });
}

}  // namespace noeira::cpu
