// The batch gather from a resident data set of bytes on CUDA: rows normalized as they are copied,
// each image cropped and flipped when augmenting. A thread per output pixel; the normalization
// comes from kernels/pixel_math.hpp and the draws from kernels/augment_math.hpp (both shared with
// the CPU). An augmenting thread recomputes its image's draw, one Philox block per pixel, which
// keeps the result independent of the launch shape.
#include <cstdint>

#include "kernels/augment_math.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/pixel_math.hpp"

namespace noeira::cuda {

namespace {

template <bool kAugmented>
struct GatherPixels {
  float* dst;
  const std::int32_t* index;  // null: row r is table row r
  const std::uint8_t* table;
  std::int64_t row_bytes;
  std::int64_t table_rows;
  PixelNormalization norm;
  CropFlip augment;  // read only when kAugmented
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t plane = row_bytes / norm.channels;
    const std::int64_t r = i / row_bytes;
    const std::int64_t c = (i - r * row_bytes) / plane;
    const std::int64_t p = i - r * row_bytes - c * plane;
    const std::int64_t sample = index != nullptr ? index[r] : r;
    if (sample < 0 || sample >= table_rows) {
      dst[i] = __uint_as_float(kPoisonWord);
      return;
    }
    std::int64_t source = p;
    if constexpr (kAugmented) {
      source = crop_flip_source(augment, crop_flip_draw(augment, sample), p / augment.width,
                                p % augment.width);
    }
    dst[i] = source < 0 ? norm.shift[c]
                        : normalized_pixel(table[sample * row_bytes + c * plane + source],
                                           norm.scale[c], norm.shift[c]);
  }
};

}  // namespace

void gather_pixels(Stream s, float* dst, const std::int32_t* index, const std::uint8_t* table,
                   std::int64_t rows, std::int64_t row_bytes, std::int64_t table_rows,
                   const PixelNormalization& norm, const CropFlip* augment) {
  if (row_bytes <= 0) return;
  if (augment != nullptr) {
    launch_map(s, rows * row_bytes,
               GatherPixels<true>{dst, index, table, row_bytes, table_rows, norm, *augment});
  } else {
    launch_map(s, rows * row_bytes,
               GatherPixels<false>{dst, index, table, row_bytes, table_rows, norm, CropFlip{}});
  }
}

}  // namespace noeira::cuda
