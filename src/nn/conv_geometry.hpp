#pragma once
// What Conv2D and ConvTranspose2D share: the ConvGeometry of a call (kernels/kernel_table.hpp) for
// the run-time number of images, and the workspace the convolution kernels ask for.
#include <cstdint>

#include "core/context.hpp"
#include "core/tensor.hpp"
#include "nn/image_shape.hpp"

namespace noeira {

// The convolution that maps `conv_in` to `conv_out` (for a transposed convolution: its output to
// its input).
struct ConvWindow {
  std::int64_t kernel = 1, stride = 1, padding = 0, dilation = 1, groups = 1;
};

inline ConvGeometry conv_geometry(std::int64_t images, ImageShape conv_in, ImageShape conv_out,
                                  ConvWindow w) {
  return ConvGeometry{.images = images,
                      .in_channels = conv_in.channels,
                      .in_height = conv_in.height,
                      .in_width = conv_in.width,
                      .out_channels = conv_out.channels,
                      .out_height = conv_out.height,
                      .out_width = conv_out.width,
                      .kernel = w.kernel,
                      .stride = w.stride,
                      .padding = w.padding,
                      .dilation = w.dilation,
                      .groups = w.groups};
}

// The floats the kernels want for a geometry, in a buffer that grows with the batch and is
// reused from call to call (null when the target wants none).
class ConvWorkspace {
 public:
  float* for_geometry(const Context& ctx, const ConvGeometry& g) {
    const std::int64_t floats = ctx.k->conv2d_workspace(g);
    if (floats == 0) return nullptr;
    buffer_.resize({floats}, ctx.target);
    return buffer_.data();
  }

 private:
  Tensor buffer_;  // [conv2d_workspace(geometry)] weight-gradient partials (CPU)
};

}  // namespace noeira
