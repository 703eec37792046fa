#pragma once
// The per-element math of pooling and nearest upsampling, written once for the CPU and CUDA
// backends (kernel_table.hpp states the contracts). Every output element is computed by one
// call that reads what it needs, and every input gradient is gathered by one call from the
// windows that read it, so no two calls write one element: results do not depend on the thread
// count or the launch shape, and both backends sum in the same order.
//
// One window walk serves every kernel: max and average pooling, their gradients (the same walk
// over the windows that hold an input element) and the upsampling gradient (a sum over
// scale × scale windows).
#include <cmath>  // INFINITY
#include <cstdint>

#include "kernels/hd.hpp"
#include "kernels/kernel_table.hpp"

namespace noeira::pool {

// A half-open range [first, end) of positions along one axis.
struct Range {
  std::int64_t first = 0;
  std::int64_t end = 0;
};

// The input positions window `o` reads along an axis of n, clipped to the image: padding cells
// are never visited (max pooling treats them as -inf, average pooling as zeros).
NOEIRA_HD Range window_inputs(std::int64_t o, std::int64_t kernel, std::int64_t stride,
                              std::int64_t pad, std::int64_t n) {
  const std::int64_t start = o * stride - pad;
  return {start < 0 ? 0 : start, start + kernel < n ? start + kernel : n};
}

// The windows (of `out` along the axis) that read input position i: the o with
// o · stride - pad <= i < o · stride - pad + kernel.
NOEIRA_HD Range windows_reading(std::int64_t i, std::int64_t kernel, std::int64_t stride,
                                std::int64_t pad, std::int64_t out) {
  const std::int64_t lowest_start = i + pad - kernel + 1;  // o · stride may not be below this
  const std::int64_t first = lowest_start <= 0 ? 0 : (lowest_start + stride - 1) / stride;
  const std::int64_t end = (i + pad) / stride + 1;
  return {first, end < out ? end : out};
}

// visit(r · row_stride + c) for every cell of rows × cols, in row-major order.
template <class Visit>
NOEIRA_HD void for_each_cell(Range rows, Range cols, std::int64_t row_stride, Visit&& visit) {
  for (std::int64_t r = rows.first; r < rows.end; ++r) {
    for (std::int64_t c = cols.first; c < cols.end; ++c) visit(r * row_stride + c);
  }
}

// The window of one plane that reads `rows` × `cols`: its maximum into *y and where it lies into
// *argmax (Max), or its mean into *y (Avg; argmax unused and may be null).
NOEIRA_HD void pool_window(Pooling pooling, float* y, std::int32_t* argmax, const float* plane,
                           Range rows, Range cols, const PoolGeometry& g) {
  if (pooling == Pooling::Max) {
    // PyTorch's rule: a strictly larger value or a NaN takes over, so the first of equal maxima
    // wins and a NaN propagates; the first cell is the answer for a window of -inf.
    float best = -INFINITY;
    std::int64_t best_at = rows.first * g.in_w + cols.first;
    // Selects, not branches: on data the branch would be taken at random, and its mispredictions
    // were most of the layer's time.
    for_each_cell(rows, cols, g.in_w, [&](std::int64_t at) {
      const float v = plane[at];
      const bool takes_over = v > best || v != v;  // v != v: v is a NaN
      best = takes_over ? v : best;
      best_at = takes_over ? at : best_at;
    });
    *y = best;
    *argmax = static_cast<std::int32_t>(best_at);
  } else {
    float total = 0.0f;
    for_each_cell(rows, cols, g.in_w, [&](std::int64_t at) { total += plane[at]; });
    // count_include_pad: the divisor is the whole window. No window reaches past the padding
    // (ceil_mode off, padding <= kernel / 2), so this is PyTorch's divisor everywhere.
    *y = total / static_cast<float>(g.kernel_h * g.kernel_w);
  }
}

// The input gradient of cell `self` (h · in_w + w) of one plane, gathered from the windows
// `rows` × `cols` that read it, in row-major order of the windows.
NOEIRA_HD float gather_window_grads(Pooling pooling, const float* dy_plane,
                                    const std::int32_t* argmax_plane, Range rows, Range cols,
                                    std::int32_t self, const PoolGeometry& g) {
  float total = 0.0f;
  if (pooling == Pooling::Max) {
    // Adding +0 for the other windows leaves every bit as skipping them would (total starts at
    // +0, so it is never -0), without a branch taken at random.
    for_each_cell(rows, cols, g.out_w, [&](std::int64_t o) {
      total += argmax_plane[o] == self ? dy_plane[o] : 0.0f;
    });
    return total;
  }
  for_each_cell(rows, cols, g.out_w, [&](std::int64_t o) { total += dy_plane[o]; });
  return total / static_cast<float>(g.kernel_h * g.kernel_w);
}

// Output element `index` of [planes, out_h, out_w] (and its argmax for Max): one thread's work
// where threads are elements (CUDA).
NOEIRA_HD void forward_at(Pooling pooling, float* y, std::int32_t* argmax, const float* x,
                          const PoolGeometry& g, std::int64_t index) {
  const std::int64_t ow = index % g.out_w;
  const std::int64_t oh = index / g.out_w % g.out_h;
  const float* plane = x + index / (g.out_w * g.out_h) * g.in_h * g.in_w;
  pool_window(pooling, y + index, pooling == Pooling::Max ? argmax + index : nullptr, plane,
              window_inputs(oh, g.kernel_h, g.stride_h, g.pad_h, g.in_h),
              window_inputs(ow, g.kernel_w, g.stride_w, g.pad_w, g.in_w), g);
}

// Input gradient element `index` of [planes, in_h, in_w], gathered from the windows that read it.
NOEIRA_HD void backward_at(Pooling pooling, float* dx, const float* dy, const std::int32_t* argmax,
                           const PoolGeometry& g, std::int64_t index) {
  const std::int64_t w = index % g.in_w;
  const std::int64_t h = index / g.in_w % g.in_h;
  const std::int64_t out_plane = index / (g.in_w * g.in_h) * g.out_h * g.out_w;
  dx[index] = gather_window_grads(
      pooling, dy + out_plane, pooling == Pooling::Max ? argmax + out_plane : nullptr,
      windows_reading(h, g.kernel_h, g.stride_h, g.pad_h, g.out_h),
      windows_reading(w, g.kernel_w, g.stride_w, g.pad_w, g.out_w),
      static_cast<std::int32_t>(h * g.in_w + w), g);
}

// Nearest upsampling by an integer scale: output element `index` of [planes, h·scale, w·scale]
// copies x[plane, oh / scale, ow / scale].
NOEIRA_HD void upsample_forward_at(float* y, const float* x, std::int64_t h, std::int64_t w,
                                   std::int64_t scale, std::int64_t index) {
  const std::int64_t out_w = w * scale;
  const std::int64_t ow = index % out_w;
  const std::int64_t oh = index / out_w % (h * scale);
  const std::int64_t plane = index / (out_w * h * scale);
  y[index] = x[(plane * h + oh / scale) * w + ow / scale];
}

// Its gradient: element `index` of [planes, h, w] sums dy over its scale × scale block (the
// window walk with kernel = stride = scale).
NOEIRA_HD void upsample_backward_at(float* dx, const float* dy, std::int64_t h, std::int64_t w,
                                    std::int64_t scale, std::int64_t index) {
  const std::int64_t out_w = w * scale;
  const std::int64_t out_h = h * scale;
  const float* dy_plane = dy + index / (w * h) * out_h * out_w;
  const Range rows = window_inputs(index / w % h, scale, scale, 0, out_h);
  const Range cols = window_inputs(index % w, scale, scale, 0, out_w);
  float total = 0.0f;
  for_each_cell(rows, cols, out_w, [&](std::int64_t at) { total += dy_plane[at]; });
  dx[index] = total;
}

}  // namespace noeira::pool
