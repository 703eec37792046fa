// The batch gather from a resident data set of bytes on the CPU: rows normalized as they are
// copied, each image cropped and flipped when augmenting. The normalization comes from
// kernels/pixel_math.hpp and the draws from kernels/augment_math.hpp (both shared with CUDA), the
// draws once per image.
#include <bit>

#include "kernels/augment_math.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/vector_isa.hpp"
#include "kernels/pixel_math.hpp"

namespace noeira::cpu {

namespace {

// A shuffled batch reads its rows from anywhere in the table, each a fresh trip to memory: the
// row this many ahead is asked for while the current one is converted.
constexpr std::int64_t kPrefetchRowsAhead = 4;
constexpr std::int64_t kCacheLine = 64;

void prefetch_row(const std::uint8_t* table, std::int64_t sample, std::int64_t row_bytes,
                  std::int64_t table_rows) {
  if (sample < 0 || sample >= table_rows) return;
  const std::uint8_t* row = table + sample * row_bytes;
  for (std::int64_t b = 0; b < row_bytes; b += kCacheLine) __builtin_prefetch(row + b);
}

}  // namespace

void gather_pixels(Stream, float* dst, const std::int32_t* index, const std::uint8_t* table,
                   std::int64_t rows, std::int64_t row_bytes, std::int64_t table_rows,
                   const PixelNormalization& norm, const CropFlip* augment) {
  const std::int64_t plane = row_bytes / norm.channels;
  parallel_for_rows(rows, row_bytes, [&](std::int64_t r) {
    float* out = dst + r * row_bytes;
    const std::int64_t sample = index != nullptr ? index[r] : r;
    if (sample < 0 || sample >= table_rows) {
      for (std::int64_t i = 0; i < row_bytes; ++i) out[i] = std::bit_cast<float>(kPoisonWord);
      return;
    }
    if (index != nullptr && r + kPrefetchRowsAhead < rows) {
      prefetch_row(table, index[r + kPrefetchRowsAhead], row_bytes, table_rows);
    }
    const std::uint8_t* in = table + sample * row_bytes;
    if (augment == nullptr) {
      // Wider vectors convert more bytes an instruction: Fashion-MNIST's epoch of batches takes
      // 26 ms of gathers on one thread on SSE2, 17.5 ms on AVX-512 (the float rows' copy: 19 ms).
      with_vector_isa([&] {
        for (std::int64_t c = 0; c < norm.channels; ++c) {
          const float scale = norm.scale[c], shift = norm.shift[c];
          for (std::int64_t p = c * plane; p < (c + 1) * plane; ++p) {
            out[p] = normalized_pixel(in[p], scale, shift);
          }
        }
      });
      return;
    }
    const CropFlipDraw draw = crop_flip_draw(*augment, sample);
    for (std::int64_t c = 0; c < norm.channels; ++c) {
      const std::uint8_t* in_plane = in + c * plane;
      float* out_plane = out + c * plane;
      for (std::int64_t y = 0; y < augment->height; ++y) {
        for (std::int64_t x = 0; x < augment->width; ++x) {
          const std::int64_t source = crop_flip_source(*augment, draw, y, x);
          out_plane[y * augment->width + x] =
              source < 0 ? norm.shift[c]
                         : normalized_pixel(in_plane[source], norm.scale[c], norm.shift[c]);
        }
      }
    }
  });
}

}  // namespace noeira::cpu
