#pragma once
// Conv2D: a 2-D convolution of NCHW images (PyTorch's Conv2d): y = conv(x, weight) + bias, with a
// square kernel, stride, zero padding, dilation and groups. The spec is a template argument, so
// the output image is known at compile time and impossible specs do not compile.
#include <cstdint>

#include "nn/conv_layer.hpp"
#include "nn/image_shape.hpp"

namespace noeira {

struct ConvSpec {
  ImageShape in;
  std::int64_t out_channels = 1;
  std::int64_t kernel = 1;  // square kernel
  std::int64_t stride = 1;
  std::int64_t padding = 0;  // zero padding on every side
  std::int64_t dilation = 1;
  std::int64_t groups = 1;
  bool bias = true;
};

// The output image of a spec's convolution.
constexpr ImageShape conv_output_image(const ConvSpec& s) {
  return {s.out_channels,
          window_output_size(s.in.height, s.kernel, s.stride, s.padding, s.dilation),
          window_output_size(s.in.width, s.kernel, s.stride, s.padding, s.dilation)};
}

template <ConvSpec S>
class Conv2D : public ConvLayer<ConvDirection::Convolve, S.in, conv_output_image(S),
                                ConvWindow{S.kernel, S.stride, S.padding, S.dilation, S.groups},
                                S.bias> {
 public:
  static_assert(S.in.channels > 0 && S.in.height > 0 && S.in.width > 0 && S.out_channels > 0,
                "Conv2D: empty input image or no output channels");
  static_assert(S.kernel > 0 && S.stride > 0 && S.dilation > 0 && S.padding >= 0,
                "Conv2D: kernel, stride and dilation must be positive, padding not negative");
  static_assert(S.groups > 0 && S.in.channels % S.groups == 0 && S.out_channels % S.groups == 0,
                "Conv2D: groups must divide the input and the output channels");
  static_assert(conv_output_image(S).height >= 1 && conv_output_image(S).width >= 1,
                "Conv2D: the dilated kernel is larger than the padded image");

  // PyTorch's layout [Co, Ci / groups, k, k] and fans: fan_in = Ci / groups · k · k,
  // fan_out = Co · k · k.
  explicit Conv2D(const Init& init)
      : Conv2D::ConvLayer(init, {S.out_channels, S.in.channels / S.groups, S.kernel, S.kernel},
                          S.in.channels / S.groups * S.kernel * S.kernel,
                          S.out_channels * S.kernel * S.kernel) {}
};

}  // namespace noeira
