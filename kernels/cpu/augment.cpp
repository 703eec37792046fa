// Image augmentation on the CPU: the batch gather with a random crop and flip per image. The draws
// come from kernels/augment_math.hpp (shared with CUDA), once per image.
#include <bit>

#include "kernels/augment_math.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"

namespace noeira::cpu {

void gather_crop_flip(Stream, float* dst, const std::int32_t* index, const float* table,
                      std::int64_t rows, std::int64_t table_rows, const CropFlip& spec) {
  const std::int64_t plane = spec.height * spec.width;
  const std::int64_t image = spec.channels * plane;
  parallel_for_rows(rows, image, [&](std::int64_t r) {
    float* out = dst + r * image;
    const std::int64_t sample = index[r];
    if (sample < 0 || sample >= table_rows) {
      for (std::int64_t i = 0; i < image; ++i) out[i] = std::bit_cast<float>(kPoisonWord);
      return;
    }
    const CropFlipDraw draw = crop_flip_draw(spec, sample);
    const float* in = table + sample * image;
    for (std::int64_t c = 0; c < spec.channels; ++c) {
      for (std::int64_t y = 0; y < spec.height; ++y) {
        for (std::int64_t x = 0; x < spec.width; ++x) {
          const std::int64_t source = crop_flip_source(spec, draw, y, x);
          out[c * plane + y * spec.width + x] =
              source < 0 ? spec.fill[c] : in[c * plane + source];
        }
      }
    }
  });
}

}  // namespace noeira::cpu
