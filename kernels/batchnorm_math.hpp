#pragma once
// Batch normalization's per-channel formulas, written once for the CPU and CUDA kernels. The
// reductions (per-channel sums over rows and pixels) are the backend's; everything the two
// backends compute from them is here, so that they agree to the bit.
//
// Over the n = rows · pixels values of a channel (of the global batch when synchronized):
//   mean = Σx / n, var = Σx² / n − mean² (biased, as PyTorch normalizes), rstd = 1/sqrt(var + eps),
//   y = (x − mean) · rstd · gamma + beta.
// The running statistics follow PyTorch: running = (1 − momentum) · running + momentum · batch,
// with the unbiased variance n/(n − 1) · var (the biased one when n = 1, where PyTorch refuses to
// train at all). The moments are sums in double, so E[x²] − E[x]² loses nothing that matters for
// fp32 activations.
// With dxhat = dy · gamma, the input gradient is
//   dx = gamma · rstd · (dy − Σdy / n − xhat · Σ(dy · xhat) / n).
#include <cmath>
#include <cstdint>

#include "kernels/hd.hpp"

namespace noeira::batchnorm {

// The layout of the moments a forward pass reduces (and a synchronized one sums over ranks):
// Σx per channel, then Σx² per channel, then the count n.
NOEIRA_HD std::int64_t moments_size(std::int64_t channels) { return 2 * channels + 1; }
// The layout of the gradient sums of the backward pass: Σdy per channel, then Σ dy · xhat.
NOEIRA_HD std::int64_t grad_sums_size(std::int64_t channels) { return 2 * channels; }

struct ChannelStats {
  float mean;
  float rstd;
  float unbiased_var;
};

NOEIRA_HD ChannelStats channel_stats(double sum, double sum_squares, double count, float eps) {
  const double mean = count > 0.0 ? sum / count : 0.0;
  double var = count > 0.0 ? sum_squares / count - mean * mean : 0.0;
  if (var < 0.0) var = 0.0;  // rounding of a constant channel
  const double unbiased = count > 1.0 ? var * count / (count - 1.0) : var;
  return {static_cast<float>(mean), 1.0f / sqrtf(static_cast<float>(var) + eps),
          static_cast<float>(unbiased)};
}

NOEIRA_HD float running_update(float running, float batch, float momentum) {
  return (1.0f - momentum) * running + momentum * batch;
}

NOEIRA_HD float running_rstd(float running_var, float eps) { return 1.0f / sqrtf(running_var + eps); }

NOEIRA_HD float input_grad(float dy, float xhat, float gamma, float rstd, float mean_dy,
                           float mean_dy_xhat) {
  return gamma * rstd * (dy - mean_dy - xhat * mean_dy_xhat);
}

}  // namespace noeira::batchnorm
