#pragma once
// What gather_pixels draws for a sample under crop-flip, written once for the CPU and CUDA kernels
// (and the tests). A sample's crop offsets and flip are a pure function of (seed, epoch, sample):
// every pixel of an image can recompute them, so a CUDA thread per pixel and a CPU loop per image
// agree without storing the draws, and a batch split over any number of ranks draws what one rank
// would.
#include <cstdint>

#include "kernels/hd.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/philox.hpp"

namespace noeira {

// A Philox stream of its own ("augm" in the high word, the epoch below it), apart from the epoch
// orders' ("orde" there), dropout's (the step, high word 0) and the text windows' (a small enum
// there), so augmentation never repeats another draw.
inline constexpr std::uint64_t kAugmentStream = 0x6175676d00000000ull;

struct CropFlipDraw {
  std::int64_t top = 0;   // the crop's first row in the padded image, in [0, 2·padding]
  std::int64_t left = 0;  // its first column, likewise
  bool flip = false;      // mirrored left to right after the crop
};

// A uniform integer in [0, bound) from 32 random bits by multiply-high; the bias, below
// bound / 2^32, is nothing against offsets of a few pixels.
NOEIRA_HD std::int64_t crop_offset_below(std::uint32_t bits, std::uint64_t bound) {
  return static_cast<std::int64_t>((static_cast<std::uint64_t>(bits) * bound) >> 32);
}

// One Philox block per sample: word 0 draws the row offset, word 1 the column offset, the top
// bit of word 2 the flip (probability exactly 1/2).
NOEIRA_HD CropFlipDraw crop_flip_draw(const CropFlip& spec, std::int64_t sample) {
  const philox::Block b =
      philox::at(spec.seed, kAugmentStream + spec.epoch, static_cast<std::uint64_t>(sample));
  const std::uint64_t positions = static_cast<std::uint64_t>(2 * spec.padding + 1);
  return CropFlipDraw{crop_offset_below(b.v[0], positions), crop_offset_below(b.v[1], positions),
                      (b.v[2] >> 31) != 0};
}

// Where output pixel (y, x) of a plane comes from: the offset y'·width + x' in the source plane,
// or -1 where the crop shows the padding. The crop reads padded pixel (y + top, x + left), i.e.
// source (y + top − padding, x + left − padding); a flip mirrors the cropped image, so output
// column x reads cropped column width − 1 − x.
NOEIRA_HD std::int64_t crop_flip_source(const CropFlip& spec, const CropFlipDraw& draw,
                                        std::int64_t y, std::int64_t x) {
  const std::int64_t cropped_x = draw.flip ? spec.width - 1 - x : x;
  const std::int64_t source_y = y + draw.top - spec.padding;
  const std::int64_t source_x = cropped_x + draw.left - spec.padding;
  const bool inside =
      source_y >= 0 && source_y < spec.height && source_x >= 0 && source_x < spec.width;
  return inside ? source_y * spec.width + source_x : -1;
}

}  // namespace noeira
