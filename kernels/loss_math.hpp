#pragma once
// Per-row loss math, written once for the CPU kernels and for CUDA kernels that give a row to one
// thread. Every softmax is taken relative to the row max, so logits of any magnitude stay finite.
// A null gradient pointer means "loss only" (evaluation).
#include <cmath>
#include <cstdint>

#include "kernels/hd.hpp"

namespace noeira::loss_math {

NOEIRA_HD float row_max(const float* x, std::int64_t n) {
  float m = x[0];
  for (std::int64_t c = 1; c < n; ++c) m = x[c] > m ? x[c] : m;
  return m;
}

// Σ exp(x - max): at least 1 (the max's own term), so its log is finite.
NOEIRA_HD float row_sum_exp(const float* x, std::int64_t n, float max) {
  float s = 0.0f;
  for (std::int64_t c = 0; c < n; ++c) s += expf(x[c] - max);
  return s;
}

// -log softmax(x)[label] = log Σ exp(x - max) + (max - x[label]).
// dx = (softmax(x) - onehot(label)) · scale.
NOEIRA_HD float cross_entropy_row(float* dx, const float* x, std::int32_t label, std::int64_t n,
                                  float scale) {
  const float max = row_max(x, n);
  const float sum = row_sum_exp(x, n, max);
  if (dx != nullptr) {
    const float inv_sum = 1.0f / sum;
    for (std::int64_t c = 0; c < n; ++c) {
      const float p = expf(x[c] - max) * inv_sum;
      dx[c] = (p - (c == label ? 1.0f : 0.0f)) * scale;
    }
  }
  return logf(sum) + (max - x[label]);
}

// -Σ t·log softmax(x) = Σ t · (lse - x), with lse = max + log Σ exp(x - max).
// dx = (Σt · softmax(x) - t) · scale: exact also for targets that do not sum to one.
NOEIRA_HD float soft_cross_entropy_row(float* dx, const float* x, const float* t, std::int64_t n,
                                       float scale) {
  const float max = row_max(x, n);
  const float sum = row_sum_exp(x, n, max);
  const float log_sum = logf(sum);
  float loss = 0.0f;
  float t_total = 0.0f;
  for (std::int64_t c = 0; c < n; ++c) {
    loss += t[c] * (log_sum + (max - x[c]));
    t_total += t[c];
  }
  if (dx != nullptr) {
    const float inv_sum = 1.0f / sum;
    for (std::int64_t c = 0; c < n; ++c) {
      const float p = expf(x[c] - max) * inv_sum;
      dx[c] = (t_total * p - t[c]) * scale;
    }
  }
  return loss;
}

// Σ (p - t)² / n; dp = 2 (p - t) / n · scale.
NOEIRA_HD float mse_row(float* dp, const float* p, const float* t, std::int64_t n, float scale) {
  const float inv_n = 1.0f / static_cast<float>(n);
  float loss = 0.0f;
  for (std::int64_t c = 0; c < n; ++c) {
    const float d = p[c] - t[c];
    loss += d * d;
    if (dp != nullptr) dp[c] = 2.0f * d * inv_n * scale;
  }
  return loss * inv_n;
}

// Index of the first maximum (ties go to the lowest class, as torch.argmax does).
NOEIRA_HD std::int64_t row_argmax(const float* x, std::int64_t n) {
  std::int64_t best = 0;
  for (std::int64_t c = 1; c < n; ++c) {
    if (x[c] > x[best]) best = c;
  }
  return best;
}

}  // namespace noeira::loss_math
