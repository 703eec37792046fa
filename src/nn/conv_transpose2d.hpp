#pragma once
// ConvTranspose2D: the transposed 2-D convolution of NCHW images (PyTorch's ConvTranspose2d), the
// input gradient of a Conv2D read as a layer: y = convᵀ(x, weight) + bias. It is the convolution
// that maps its output image back to its input image with the roles of the kernels swapped
// (kernel_table.hpp): forward conv2d_backward_data, input gradient conv2d_forward, weight gradient
// conv2d_backward_filter with the input in the place of the output gradient.
#include <cstdint>

#include "nn/conv_layer.hpp"
#include "nn/image_shape.hpp"

namespace noeira {

struct ConvTransposeSpec {
  ImageShape in;
  std::int64_t out_channels = 1;
  std::int64_t kernel = 1;  // square kernel
  std::int64_t stride = 1;
  std::int64_t padding = 0;         // removed from every side of the full output
  std::int64_t output_padding = 0;  // added to the bottom and right of the output
  std::int64_t dilation = 1;
  std::int64_t groups = 1;
  bool bias = true;
};

// PyTorch's output size: (n − 1)·stride − 2·padding + dilation·(kernel − 1) + output_padding + 1.
constexpr std::int64_t transposed_window_output_size(std::int64_t n, const ConvTransposeSpec& s) {
  return (n - 1) * s.stride - 2 * s.padding + s.dilation * (s.kernel - 1) + s.output_padding + 1;
}

// The output image of a spec's transposed convolution.
constexpr ImageShape transposed_output_image(const ConvTransposeSpec& s) {
  return {s.out_channels, transposed_window_output_size(s.in.height, s),
          transposed_window_output_size(s.in.width, s)};
}

template <ConvTransposeSpec S>
class ConvTranspose2D
    : public ConvLayer<ConvDirection::Transpose, S.in, transposed_output_image(S),
                       ConvWindow{S.kernel, S.stride, S.padding, S.dilation, S.groups}, S.bias> {
 public:
  static_assert(S.in.channels > 0 && S.in.height > 0 && S.in.width > 0 && S.out_channels > 0,
                "ConvTranspose2D: empty input image or no output channels");
  static_assert(S.kernel > 0 && S.stride > 0 && S.dilation > 0 && S.padding >= 0,
                "ConvTranspose2D: kernel, stride and dilation must be positive, padding not "
                "negative");
  static_assert(S.groups > 0 && S.in.channels % S.groups == 0 && S.out_channels % S.groups == 0,
                "ConvTranspose2D: groups must divide the input and the output channels");
  // PyTorch also accepts output_padding below the dilation; then the convolution it transposes
  // would make a larger image than this layer's input, which the kernels' geometry does not hold.
  static_assert(S.output_padding >= 0 && S.output_padding < S.stride,
                "ConvTranspose2D: output_padding must be in [0, stride)");
  static constexpr ImageShape out = transposed_output_image(S);
  static_assert(out.height >= 1 && out.width >= 1,
                "ConvTranspose2D: the padding removes the whole output");
  // The convolution from the output image to the input image that this layer transposes.
  static_assert(window_output_size(out.height, S.kernel, S.stride, S.padding, S.dilation) ==
                        S.in.height &&
                    window_output_size(out.width, S.kernel, S.stride, S.padding, S.dilation) ==
                        S.in.width,
                "ConvTranspose2D: the transposed convolution does not map back to the input");

  // PyTorch's layout [Ci, Co / groups, k, k] and its fans for it.
  explicit ConvTranspose2D(const Init& init)
      : ConvTranspose2D::ConvLayer(init,
                                   {S.in.channels, S.out_channels / S.groups, S.kernel, S.kernel},
                                   S.out_channels / S.groups * S.kernel * S.kernel,
                                   S.in.channels * S.kernel * S.kernel) {}
};

}  // namespace noeira
