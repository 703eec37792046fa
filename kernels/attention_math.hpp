#pragma once
// The per-element math of the attention kernels, written once for the CPU and CUDA backends: how
// many keys a softmax row sees, and RoPE's angle and rotation.
#include <cmath>
#include <cstdint>

#include "kernels/hd.hpp"
#include "kernels/kernel_table.hpp"

namespace noeira::attn {

// The number of keys row `row` of a [batch, heads, tq, tk] score tensor sees (its visible prefix).
NOEIRA_HD std::int64_t visible_keys(const AttentionMask& mask, std::int64_t row,
                                    std::int64_t heads, std::int64_t tq, std::int64_t tk) {
  std::int64_t n = tk;
  if (mask.causal) {
    const std::int64_t position = tk - tq + row % tq;
    n = position + 1 < n ? position + 1 : n;
  }
  if (mask.key_lengths != nullptr) {
    const std::int64_t len = mask.key_lengths[row / (heads * tq)];
    n = len < n ? len : n;
  }
  return n < 0 ? 0 : n;
}

// The angle of pair i (elements 2i, 2i+1) at `position`: position · base^(-2i / head_dim), as
// torch computes inv_freq = 1 / base^(arange(0, d, 2) / d), in double.
NOEIRA_HD double rope_angle(std::int64_t position, std::int64_t pair, std::int64_t head_dim,
                            double base) {
  const double inv_freq =
      1.0 / pow(base, static_cast<double>(2 * pair) / static_cast<double>(head_dim));
  return static_cast<double>(position) * inv_freq;
}

// Where pair i of a head begins and how far its second element is (kernel_table.hpp RopePairs).
NOEIRA_HD std::int64_t rope_first(bool interleaved, std::int64_t pair) {
  return interleaved ? 2 * pair : pair;
}
NOEIRA_HD std::int64_t rope_stride(bool interleaved, std::int64_t head_dim) {
  return interleaved ? 1 : head_dim / 2;
}

// Turns the pair (x[0], x[stride]) by the angle whose cosine and sine are c and s; y may alias x.
NOEIRA_HD void rope_turn(float* y, const float* x, std::int64_t stride, double c, double s) {
  const double x0 = x[0];
  const double x1 = x[stride];
  y[0] = static_cast<float>(x0 * c - x1 * s);
  y[stride] = static_cast<float>(x0 * s + x1 * c);
}

}  // namespace noeira::attn
