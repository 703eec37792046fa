#pragma once
// Per-row loss math, written once for every backend. A row's math is a function of a Row, the
// backend's walk over that row's columns:
//   row.size()  the number of columns;
//   row.sum(f)  Σ_c f(c) in float, returned to every caller;
//   row.max(f)  max_c f(c), likewise;
//   row.each(f) calls f(c) for the columns this caller owns.
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
  const float sum = row.sum([&](std::int64_t c) { return expf(x[c] - max); });
  if (dx != nullptr) {
    const float inv_sum = 1.0f / sum;
    row.each([&](std::int64_t c) {
      const float p = expf(x[c] - max) * inv_sum;
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
  const float sum = row.sum([&](std::int64_t c) { return expf(x[c] - max); });
  const float log_sum = logf(sum);
  const float loss = row.sum([&](std::int64_t c) { return t[c] * (log_sum + (max - x[c])); });
  if (dx != nullptr) {
    const float t_total = row.sum([&](std::int64_t c) { return t[c]; });
    const float inv_sum = 1.0f / sum;
    row.each([&](std::int64_t c) {
      const float p = expf(x[c] - max) * inv_sum;
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
