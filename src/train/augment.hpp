#pragma once
// Augmentation of training images (--augment): crop-flip is torchvision's CIFAR pipeline,
// RandomCrop(size, padding) then RandomHorizontalFlip(), applied on the target as the training
// batch is gathered (gather_pixels). What a sample becomes is a pure function of (seed, epoch,
// sample index in the training split), so the global batch is the same for any number of ranks,
// any thread count and a resumed run. Evaluation never augments.
#include <cstdint>
#include <string_view>

#include "core/names.hpp"
#include "kernels/kernel_table.hpp"
#include "train/batch.hpp"

namespace noeira {

enum class Augment : std::uint8_t { None, CropFlip };
inline constexpr NameTable<Augment, 2> kAugmentNames{
    {{{Augment::None, "none"}, {Augment::CropFlip, "crop-flip"}}}, "augmentation"};

std::string_view to_string(Augment augment);
Augment parse_augment(std::string_view name);

struct Augmentation {
  Augment kind = Augment::None;
  std::int64_t padding = 0;  // crop-flip: pixels added on every side before the crop
};

// The crop and flip of `data`'s images in `epoch` under `seed`. The padding is the value a black
// pixel normalizes to, channel by channel (PixelNormalization::shift): torchvision pads the raw
// image with 0 before ToTensor and Normalize, so its padding becomes (0 - mean) / std, and so does
// ours, normalized as the batch is gathered (gather_pixels). InputError when `data` has no image
// shape.
CropFlip crop_flip_spec(const ResidentData& data, std::int64_t padding, std::uint64_t seed,
                        std::int64_t epoch);

}  // namespace noeira
