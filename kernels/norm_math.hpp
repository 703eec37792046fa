#pragma once
// The per-element formulas of LayerNorm and RMSNorm, written once for the CPU and CUDA kernels.
// The per-row reductions they take as arguments are the backend's (a serial loop per row on the
// CPU, a block reduction on CUDA).
//
// LayerNorm: xhat = (x - mean) · rstd, rstd = 1 / sqrt(var + eps), y = xhat · gamma + beta.
// RMSNorm:   xhat = x · rstd,          rstd = 1 / sqrt(mean(x²) + eps), y = xhat · gamma.
// With g = dy · gamma (the gradient of xhat), both backward passes are
//   dx = rstd · (g - mean(g) - xhat · mean(g · xhat)),
// where RMSNorm has no mean(g) term because it does not subtract the mean.
#include <cmath>

#include "kernels/hd.hpp"

namespace noeira::norm {

// rstd from the row's variance (LayerNorm) or mean square (RMSNorm).
NOEIRA_HD float rstd(float variance_or_mean_square, float eps) {
  return 1.0f / sqrtf(variance_or_mean_square + eps);
}

// Input gradient of one element. mean_g is 0 for RMSNorm.
NOEIRA_HD float input_grad(float g, float xhat, float rstd, float mean_g, float mean_g_xhat) {
  return rstd * (g - mean_g - xhat * mean_g_xhat);
}

}  // namespace noeira::norm
