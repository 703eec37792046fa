// Softmax on the CPU, over the last dimension and over attention scores (a masked softmax over a
// visible prefix of each row): one row per iteration, each row on one thread in a fixed order
// (kernels/cpu/lane_sums.hpp), so the result does not depend on the thread count or vector width.
#include <array>
#include <cmath>

#include "kernels/activation_math.hpp"
#include "kernels/attention_math.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/lane_sums.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/vector_isa.hpp"

namespace noeira::cpu {

namespace {

// yr[0:n] = softmax(xr[0:n]), yr[n:cols] = 0. Reads xr[c] before writing yr[c], so y may alias x.
// The exponentials and the sum (fixed lanes) at the CPU's vector width, the same bits at any.
void softmax_row(float* yr, const float* xr, std::int64_t n, std::int64_t cols) {
  if (n > 0) {
    // Subtracting the row max keeps exp() from overflowing; the result is unchanged.
    float max = xr[0];
    for (std::int64_t c = 1; c < n; ++c) max = xr[c] > max ? xr[c] : max;
    with_vector_isa([&] {
      for (std::int64_t c = 0; c < n; ++c) yr[c] = act::exp_nonpositive(xr[c] - max);
      LaneSums<1> total;
      total.add(n, [&](std::int64_t c) { return std::array{static_cast<double>(yr[c])}; });
      const float inv = static_cast<float>(1.0 / total.total(0));
      for (std::int64_t c = 0; c < n; ++c) yr[c] *= inv;
    });
  }
  for (std::int64_t c = n; c < cols; ++c) yr[c] = 0.0f;
}

}  // namespace

void softmax_forward(Stream, float* y, const float* x, std::int64_t rows, std::int64_t cols) {
  parallel_for_rows(rows, cols, [&](std::int64_t r) {
    softmax_row(y + r * cols, x + r * cols, cols, cols);
  });
}

void masked_softmax_forward(Stream, float* y, const float* x, AttentionMask mask,
                            std::int64_t batch, std::int64_t heads, std::int64_t tq,
                            std::int64_t tk) {
  parallel_for_rows(batch * heads * tq, tk, [&](std::int64_t r) {
    const std::int64_t n = attn::visible_keys(mask, r, heads, tq, tk);
    softmax_row(y + r * tk, x + r * tk, n, tk);
  });
}

void softmax_backward(Stream, float* dx, const float* dy, const float* y, std::int64_t rows,
                      std::int64_t cols) {
  // dx = y ⊙ (dy - <dy, y>); the dot product is read in full before dx is written, so dx may
  // alias dy.
  parallel_for_rows(rows, cols, [&](std::int64_t r) {
    const float* dyr = dy + r * cols;
    const float* yr = y + r * cols;
    float* dxr = dx + r * cols;
    with_vector_isa([&] {
      LaneSums<1> dot;
      dot.add(cols, [&](std::int64_t c) {
        return std::array{static_cast<double>(dyr[c]) * yr[c]};
      });
      const float d = static_cast<float>(dot.total(0));
      for (std::int64_t c = 0; c < cols; ++c) dxr[c] = yr[c] * (dyr[c] - d);
    });
  });
}

}  // namespace noeira::cpu
