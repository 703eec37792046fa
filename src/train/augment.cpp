#include "train/augment.hpp"

#include "kernels/error.hpp"

namespace noeira {

std::string_view to_string(Augment augment) { return kAugmentNames.name_of(augment); }

Augment parse_augment(std::string_view name) { return kAugmentNames.parse(name); }

CropFlip crop_flip_spec(const ResidentData& data, std::int64_t padding, std::uint64_t seed,
                        std::int64_t epoch) {
  const ImageShape& image = data.image;
  if (image.numel() != data.features || data.normalization.channels != image.channels) {
    throw InputError(detail::concat("--augment crop-flip: ", data.name, " has ", data.features,
                                    " features per sample but no image shape to crop"));
  }
  NOEIRA_CHECK(padding >= 0 && epoch >= 0, "crop_flip_spec: padding ", padding, ", epoch ", epoch);
  CropFlip spec;
  spec.seed = seed;
  spec.epoch = static_cast<std::uint64_t>(epoch);
  spec.channels = image.channels;
  spec.height = image.height;
  spec.width = image.width;
  spec.padding = padding;
  return spec;
}

}  // namespace noeira
