#include "kernels/cpu/im2col.hpp"

#include <algorithm>
#include <cstring>

namespace noeira::cpu {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The output columns [lo, hi) whose tap at input column offset `offset` (ow·stride + offset)
// falls inside the image; the others read padding.
struct ValidColumns {
  std::int64_t lo, hi;
};
ValidColumns valid_columns(std::int64_t offset, const ConvGeometry& g) {
  const std::int64_t lo = std::min(offset >= 0 ? 0 : ceil_div(-offset, g.stride), g.out_width);
  const std::int64_t end = g.in_width - offset;
  const std::int64_t hi = std::clamp(end > 0 ? ceil_div(end, g.stride) : 0, lo, g.out_width);
  return {lo, hi};
}

// Visits every (column row, output row) pair of one image: body(columns_at, input_at, offset,
// valid) with columns_at the first of that output row's Wo entries in the columns, input_at the
// first pixel of the input row the tap reads (-1 where that row is padding), and output column ow
// reading input column ow·stride + offset for ow in valid.
template <class Body>
void for_each_tap_row(const ConvGeometry& g, Body&& body) {
  const std::int64_t k = g.kernel;
  const std::int64_t out_pixels = g.out_height * g.out_width;
  for (std::int64_t c = 0; c < g.in_channels; ++c) {
    for (std::int64_t i = 0; i < k; ++i) {
      for (std::int64_t j = 0; j < k; ++j) {
        const std::int64_t row = (c * k + i) * k + j;
        const std::int64_t offset = j * g.dilation - g.padding;
        const ValidColumns valid = valid_columns(offset, g);
        for (std::int64_t oh = 0; oh < g.out_height; ++oh) {
          const std::int64_t ih = oh * g.stride - g.padding + i * g.dilation;
          const bool inside = ih >= 0 && ih < g.in_height;
          body(row * out_pixels + oh * g.out_width,
               inside ? (c * g.in_height + ih) * g.in_width : -1, offset, valid);
        }
      }
    }
  }
}

}  // namespace

void im2col(float* cols, const float* image, const ConvGeometry& g) {
  const std::int64_t s = g.stride;
  const std::int64_t wo = g.out_width;
  for_each_tap_row(g, [&](std::int64_t cols_at, std::int64_t input_at, std::int64_t offset,
                          ValidColumns v) {
    float* __restrict dst = cols + cols_at;
    if (input_at < 0) {
      std::fill(dst, dst + wo, 0.0f);
      return;
    }
    const float* src = image + input_at;
    std::fill(dst, dst + v.lo, 0.0f);
    if (s == 1) {
      if (v.hi > v.lo) {
        std::memcpy(dst + v.lo, src + v.lo + offset, sizeof(float) * (v.hi - v.lo));
      }
    } else {
      for (std::int64_t ow = v.lo; ow < v.hi; ++ow) dst[ow] = src[ow * s + offset];
    }
    std::fill(dst + v.hi, dst + wo, 0.0f);
  });
}

void col2im(float* image, const float* cols, const ConvGeometry& g) {
  std::fill(image, image + g.in_channels * g.in_height * g.in_width, 0.0f);
  const std::int64_t s = g.stride;
  for_each_tap_row(g, [&](std::int64_t cols_at, std::int64_t input_at, std::int64_t offset,
                          ValidColumns v) {
    if (input_at < 0) return;
    const float* __restrict src = cols + cols_at;
    float* dst = image + input_at;
    for (std::int64_t ow = v.lo; ow < v.hi; ++ow) dst[ow * s + offset] += src[ow];
  });
}

}  // namespace noeira::cpu
