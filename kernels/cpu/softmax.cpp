// Softmax over the last dimension on the CPU: one row per iteration, each row serial, so the result
// does not depend on the thread count.
#include <cmath>

#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"

namespace noeira::cpu {

void softmax_forward(Stream, float* y, const float* x, std::int64_t rows, std::int64_t cols) {
  parallel_for_rows(rows, cols, [&](std::int64_t r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    // Subtracting the row max keeps exp() from overflowing; the result is unchanged.
    float max = xr[0];
    for (std::int64_t c = 1; c < cols; ++c) max = xr[c] > max ? xr[c] : max;
    double total = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) {
      yr[c] = std::exp(xr[c] - max);
      total += yr[c];
    }
    const float inv = static_cast<float>(1.0 / total);
    for (std::int64_t c = 0; c < cols; ++c) yr[c] *= inv;
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
    double dot = 0.0;
    for (std::int64_t c = 0; c < cols; ++c) dot += static_cast<double>(dyr[c]) * yr[c];
    const float d = static_cast<float>(dot);
    for (std::int64_t c = 0; c < cols; ++c) dxr[c] = yr[c] * (dyr[c] - d);
  });
}

}  // namespace noeira::cpu
