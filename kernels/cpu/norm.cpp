// LayerNorm and RMSNorm on the CPU, one skeleton for both: RMSNorm is LayerNorm without the
// centring (mean == nullptr: the row mean is taken as 0) and without the shift (beta, dbeta ==
// nullptr). Subtracting a zero mean is exact, so each gets the results of a kernel of its own.
// Row statistics are summed in double in fixed lanes (kernels/cpu/lane_sums.hpp), one row per
// iteration; gamma and beta gradients are summed over rows in row order (column blocks in
// parallel), so nothing depends on the thread count or the vector width.
// The element formulas are in kernels/norm_math.hpp.
#include <array>
#include <cmath>

#include "kernels/bf16_math.hpp"
#include "kernels/cpu/column_sum.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/lane_sums.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/vector_isa.hpp"
#include "kernels/norm_math.hpp"

namespace noeira::cpu {

namespace {

void store(GradMode mode, float& out, float value) {
  out = mode == GradMode::Accumulate ? out + value : value;
}

}  // namespace

void norm_forward_typed(Stream, void* y, DType y_dtype, float* mean, float* rstd, const float* x,
                        const float* gamma, const float* beta, std::int64_t rows,
                        std::int64_t cols, float eps) {
  const bool y_bits = y_dtype == DType::BF16;
  parallel_for_rows(rows, cols, [&](std::int64_t r) {
    with_vector_isa([&] {
      const float* __restrict xr = x + r * cols;
      float m = 0.0f;
      if (mean != nullptr) {
        // Two passes (mean, then squared deviations): no cancellation for rows with a large mean.
        LaneSums<1> s;
        s.add(cols, [&](std::int64_t c) { return std::array{static_cast<double>(xr[c])}; });
        m = static_cast<float>(s.total(0) / static_cast<double>(cols));
        mean[r] = m;
      }
      LaneSums<1> sq;
      sq.add(cols, [&](std::int64_t c) {
        const double d = static_cast<double>(xr[c]) - m;
        return std::array{d * d};
      });
      const float variance = static_cast<float>(sq.total(0) / static_cast<double>(cols));
      const float rs = norm::rstd(variance, eps);
      auto value = [&](std::int64_t c) {
        const float v = (xr[c] - m) * rs * gamma[c];
        return beta != nullptr ? v + beta[c] : v;
      };
      if (y_bits) {
        std::uint16_t* __restrict yr = static_cast<std::uint16_t*>(y) + r * cols;
        for (std::int64_t c = 0; c < cols; ++c) yr[c] = bf16_bits(value(c));
      } else {
        float* __restrict yr = static_cast<float*>(y) + r * cols;
        for (std::int64_t c = 0; c < cols; ++c) yr[c] = value(c);
      }
      rstd[r] = rs;
    });
  });
}

void norm_backward(Stream, GradMode mode, float* dx, float* dgamma, float* dbeta,
                   const float* dy, const float* x, const float* gamma, const float* mean,
                   const float* rstd, std::int64_t rows, std::int64_t cols) {
  // Parameter gradients first: dgamma = Σ_rows dy · xhat, dbeta = Σ_rows dy.
  parallel_for_column_blocks(rows, cols, [&](std::int64_t c0, std::int64_t c1) {
    double sg[kColumnBlock] = {};
    double sb[kColumnBlock] = {};
    with_vector_isa([&] {  // across the block's columns: each column's sum keeps its row order
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* __restrict dyr = dy + r * cols;
        const float* __restrict xr = x + r * cols;
        const float m = mean != nullptr ? mean[r] : 0.0f;
        const float rs = rstd[r];
        for (std::int64_t c = c0; c < c1; ++c) {
          const float xhat = (xr[c] - m) * rs;
          sg[c - c0] += static_cast<double>(dyr[c]) * xhat;
          sb[c - c0] += dyr[c];
        }
      }
    });
    for (std::int64_t c = c0; c < c1; ++c) {
      store(mode, dgamma[c], static_cast<float>(sg[c - c0]));
      if (dbeta != nullptr) store(mode, dbeta[c], static_cast<float>(sb[c - c0]));
    }
  });
  if (dx == nullptr) return;
  parallel_for_rows(rows, cols, [&](std::int64_t r) {
    const float* dyr = dy + r * cols;
    const float* xr = x + r * cols;
    float* dxr = dx + r * cols;
    const float m = mean != nullptr ? mean[r] : 0.0f;
    const float rs = rstd[r];
    with_vector_isa([&] {
      LaneSums<2> sums;  // Σ g, Σ g · xhat
      sums.add(cols, [&](std::int64_t c) {
        const float g = dyr[c] * gamma[c];
        return std::array{static_cast<double>(g), static_cast<double>(g) * ((xr[c] - m) * rs)};
      });
      // Without centring the mean of g does not enter the gradient.
      const float mean_g =
          mean != nullptr ? static_cast<float>(sums.total(0) / static_cast<double>(cols)) : 0.0f;
      const float mean_g_xhat = static_cast<float>(sums.total(1) / static_cast<double>(cols));
      for (std::int64_t c = 0; c < cols; ++c) {
        dxr[c] = norm::input_grad(dyr[c] * gamma[c], (xr[c] - m) * rs, rs, mean_g, mean_g_xhat);
      }
    });
  });
}

}  // namespace noeira::cpu
