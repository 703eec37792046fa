#pragma once
// Per-row loss math, written once for every backend. A row's math is a function of a Row, the
// backend's walk over that row's columns:
//   row.size()  the number of columns;
//   row.sum(f)  Σ_c f(c) in float, returned to every caller;
//   row.max(f)  max_c f(c), likewise;
//   row.each(f) calls f(c) for the columns this caller owns;
//   row.exp(d)  e^d for d = x - max <= 0: the backend's exponential (CUDA's expf; on the CPU one
//               that vectorizes, the same bits in every vector lane).
// The CPU's SerialRow visits the columns in order on one thread; CUDA's BlockRow spreads them
// over a block and combines the threads' parts by block reductions in a fixed order, so that a
// 50k-token vocabulary is a block's work rather than one thread's.
// Every softmax is taken relative to the row max, so logits of any magnitude stay finite.
// A null gradient pointer means "loss only" (evaluation).
#include <cmath>
#include <cstdint>

#include "kernels/hd.hpp"
#include "kernels/kernel_table.hpp"

namespace noeira::loss_math {

// -log softmax(x)[label] = log Σ exp(x - max) + (max - x[label]).
// dx = (softmax(x) - onehot(label)) · scale.
template <class Row>
NOEIRA_HD float cross_entropy_row(const Row& row, float* dx, const float* x, std::int32_t label,
                                  std::int64_t ignore_index, float scale) {
  if (label == ignore_index) {
    if (dx != nullptr) row.each([&](std::int64_t c) { dx[c] = 0.0f; });
    return 0.0f;
  }
  // Labels are not checked on the device: a bad one poisons its row instead of reading out of
  // bounds.
  if (label < 0 || label >= row.size()) {
    if (dx != nullptr) row.each([&](std::int64_t c) { dx[c] = NAN; });
    return NAN;
  }
  const float max = row.max([&](std::int64_t c) { return x[c]; });
  // At least 1 (the max's own term), so its log is finite.
  const float sum = row.sum([&](std::int64_t c) { return row.exp(x[c] - max); });
  if (dx != nullptr) {
    const float inv_sum = 1.0f / sum;
    row.each([&](std::int64_t c) {
      const float p = row.exp(x[c] - max) * inv_sum;
      dx[c] = (p - (c == label ? 1.0f : 0.0f)) * scale;
    });
  }
  return logf(sum) + (max - x[label]);
}

// -Σ t·log softmax(x) = Σ t · (lse - x), with lse = max + log Σ exp(x - max).
// dx = (Σt · softmax(x) - t) · scale: exact also for targets that do not sum to one.
template <class Row>
NOEIRA_HD float soft_cross_entropy_row(const Row& row, float* dx, const float* x, const float* t,
                                       float scale) {
  const float max = row.max([&](std::int64_t c) { return x[c]; });
  const float sum = row.sum([&](std::int64_t c) { return row.exp(x[c] - max); });
  const float log_sum = logf(sum);
  const float loss = row.sum([&](std::int64_t c) { return t[c] * (log_sum + (max - x[c])); });
  if (dx != nullptr) {
    const float t_total = row.sum([&](std::int64_t c) { return t[c]; });
    const float inv_sum = 1.0f / sum;
    row.each([&](std::int64_t c) {
      const float p = row.exp(x[c] - max) * inv_sum;
      dx[c] = (t_total * p - t[c]) * scale;
    });
  }
  return loss;
}

// Σ (p - t)² / n; dp = 2 (p - t) / n · scale.
template <class Row>
NOEIRA_HD float mse_row(const Row& row, float* dp, const float* p, const float* t, float scale) {
  const float inv_n = 1.0f / static_cast<float>(row.size());
  const float loss = row.sum([&](std::int64_t c) {
    const float d = p[c] - t[c];
    return d * d;
  });
  if (dp != nullptr) {
    row.each([&](std::int64_t c) { dp[c] = 2.0f * (p[c] - t[c]) * inv_n * scale; });
  }
  return loss * inv_n;
}

// Soft CE against the two-hot encoding of y over n bins evenly spaced on [low, high]: y (clamped)
// falls between bins k and k+1 at fraction w, so the target is (1 - w) at k and w at k+1. A NaN
// target, which the clamp would silently turn into `low`, poisons its row instead.
template <class Row>
NOEIRA_HD float two_hot_row(const Row& row, float* dx, const float* x, float y, float low,
                            float high, float scale) {
  if (y != y) {
    if (dx != nullptr) row.each([&](std::int64_t c) { dx[c] = NAN; });
    return NAN;
  }
  const std::int64_t n = row.size();
  std::int64_t k = 0;
  float w = 0.0f;
  if (n > 1) {
    const float clamped = fminf(fmaxf(y, low), high);
    const float pos = (clamped - low) / (high - low) * static_cast<float>(n - 1);
    k = static_cast<std::int64_t>(floorf(pos));
    k = k < 0 ? 0 : (k > n - 2 ? n - 2 : k);
    w = pos - static_cast<float>(k);
  }
  const float max = row.max([&](std::int64_t c) { return x[c]; });
  const float sum = row.sum([&](std::int64_t c) { return row.exp(x[c] - max); });
  if (dx != nullptr) {
    const float inv_sum = 1.0f / sum;
    row.each([&](std::int64_t c) {
      const float t = c == k ? 1.0f - w : (c == k + 1 ? w : 0.0f);
      dx[c] = (row.exp(x[c] - max) * inv_sum - t) * scale;
    });
  }
  const float log_sum_exp = logf(sum) + max;
  const float picked = n > 1 ? (1.0f - w) * x[k] + w * x[k + 1] : x[0];
  return log_sum_exp - picked;
}

// Σ_c ½ (log v_c + (μ_c - t_c)² / v_c) / d over the row's d means μ = p[0, d) and variances
// v = max(p[d, 2d), floor); dμ = (μ - t) / v / d, dv = ½ (1/v - (μ - t)² / v²) / d, both · scale.
template <class Row>
NOEIRA_HD float gaussian_nll_row(const Row& row, float* dp, const float* p, const float* t,
                                 float floor, float scale) {
  const std::int64_t d = row.size() / 2;
  const float inv_d = 1.0f / static_cast<float>(d);
  const float loss = row.sum([&](std::int64_t c) {
    if (c >= d) return 0.0f;
    const float v = fmaxf(p[d + c], floor);
    const float e = p[c] - t[c];
    return 0.5f * (logf(v) + e * e / v);
  });
  if (dp != nullptr) {
    row.each([&](std::int64_t c) {
      const std::int64_t m = c < d ? c : c - d;
      const float v = fmaxf(p[d + m], floor);
      const float e = p[m] - t[m];
      dp[c] = (c < d ? e / v : 0.5f * (1.0f / v - e * e / (v * v))) * inv_d * scale;
    });
  }
  return loss * inv_d;
}

// Row r of the loss `kind` (kernel_table.hpp documents each), walked by `row`.
template <class Row>
NOEIRA_HD float row_loss(const Row& row, LossKind kind, const RowLossArgs& a, std::int64_t r) {
  const std::int64_t o = r * a.cols;
  float* d = a.grad != nullptr ? a.grad + o : nullptr;
  switch (kind) {
    case LossKind::CrossEntropy:
      return cross_entropy_row(row, d, a.pred + o, a.labels[r], a.ignore_index, a.grad_scale);
    case LossKind::SoftCrossEntropy:
      return soft_cross_entropy_row(row, d, a.pred + o, a.target + o, a.grad_scale);
    case LossKind::Mse:
      return mse_row(row, d, a.pred + o, a.target + o, a.grad_scale);
    case LossKind::TwoHot:
      return two_hot_row(row, d, a.pred + o, a.target[r], a.bin_low, a.bin_high, a.grad_scale);
    case LossKind::GaussianNll:
      return gaussian_nll_row(row, d, a.pred + o, a.target + r * (a.cols / 2), a.variance_floor,
                              a.grad_scale);
  }
  return NAN;
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
