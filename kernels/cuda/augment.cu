// Image augmentation on CUDA: the batch gather with a random crop and flip per image. A thread per
// output pixel recomputes its image's draw from kernels/augment_math.hpp (shared with the CPU),
// which costs one Philox block per pixel and keeps the result independent of the launch shape.
#include <cstdint>

#include "kernels/augment_math.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"

namespace noeira::cuda {

namespace {

struct GatherCropFlip {
  float* dst;
  const std::int32_t* index;
  const float* table;
  std::int64_t table_rows;
  CropFlip spec;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t plane = spec.height * spec.width;
    const std::int64_t image = spec.channels * plane;
    const std::int64_t r = i / image;
    const std::int64_t c = (i - r * image) / plane;
    const std::int64_t p = i - r * image - c * plane;
    const std::int64_t sample = index[r];
    if (sample < 0 || sample >= table_rows) {
      dst[i] = __uint_as_float(kPoisonWord);
      return;
    }
    const std::int64_t source =
        crop_flip_source(spec, crop_flip_draw(spec, sample), p / spec.width, p % spec.width);
    dst[i] = source < 0 ? spec.fill[c] : table[sample * image + c * plane + source];
  }
};

}  // namespace

void gather_crop_flip(Stream s, float* dst, const std::int32_t* index, const float* table,
                      std::int64_t rows, std::int64_t table_rows, const CropFlip& spec) {
  launch_map(s, rows * spec.channels * spec.height * spec.width,
             GatherCropFlip{dst, index, table, table_rows, spec});
}

}  // namespace noeira::cuda
