#pragma once
// Images in the module contract: an activation [rows, C, H, W] (NCHW, PyTorch's layout) is rows
// of C·H·W, so a module that acts on images has in_dim = C·H·W and also says, at compile time,
// which image it reads (in_image) and which it writes (out_image). Sequential checks the widths;
// image leaves check the shapes with static_asserts of their own (image_chain below), so a conv
// net whose spatial sizes do not chain is a compile error, not a run-time surprise.
//
// Output tensors of image leaves are shaped [rows, C, H, W]; a Linear after them reads the same
// rows of C·H·W (core/module.hpp input_rows), so no Flatten leaf is needed between the two.
#include <cstdint>

#include "core/tensor.hpp"

namespace noeira {

struct ImageShape {
  std::int64_t channels = 1;
  std::int64_t height = 1;
  std::int64_t width = 1;

  constexpr std::int64_t pixels() const { return height * width; }
  constexpr std::int64_t numel() const { return channels * height * width; }
  constexpr bool operator==(const ImageShape&) const = default;
};

// The output size of a sliding window along one axis (convolution, pooling): PyTorch's formula
// floor((n + 2·padding − dilation·(kernel − 1) − 1) / stride) + 1.
constexpr std::int64_t window_output_size(std::int64_t n, std::int64_t kernel, std::int64_t stride,
                                          std::int64_t padding, std::int64_t dilation = 1) {
  return (n + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
}

// [rows, C, H, W] for an image batch of `rows` images.
inline Shape image_batch_shape(std::int64_t rows, ImageShape s) {
  return {rows, s.channels, s.height, s.width};
}

// Whether module B can read what module A writes as an image (both image modules).
template <class A, class B>
inline constexpr bool image_chain = A::out_image == B::in_image;

}  // namespace noeira
