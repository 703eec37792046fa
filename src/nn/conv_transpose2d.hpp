#pragma once
// ConvTranspose2D: the transposed 2-D convolution of NCHW images (PyTorch's ConvTranspose2d), the
// input gradient of a Conv2D read as a layer: y = convᵀ(x, weight) + bias. It is the convolution
// that maps its output image back to its input image with the roles of the kernels swapped
// (kernel_table.hpp): forward conv2d_backward_data, input gradient conv2d_forward, weight gradient
// conv2d_backward_filter with the input in the place of the output gradient.
#include <cstdint>
#include <string_view>

#include "core/module.hpp"
#include "nn/conv_geometry.hpp"
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

template <ConvTransposeSpec S>
class ConvTranspose2D {
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

  static constexpr int arity = 1;
  static constexpr ImageShape in_image = S.in;
  static constexpr ImageShape out_image{S.out_channels,
                                        transposed_window_output_size(S.in.height, S),
                                        transposed_window_output_size(S.in.width, S)};
  static_assert(out_image.height >= 1 && out_image.width >= 1,
                "ConvTranspose2D: the padding removes the whole output");
  static constexpr std::int64_t in_dim = in_image.numel();
  static constexpr std::int64_t out_dim = out_image.numel();
  static constexpr ConvWindow window{S.kernel, S.stride, S.padding, S.dilation, S.groups};
  // The convolution from out_image to in_image that this layer transposes.
  static_assert(window_output_size(out_image.height, S.kernel, S.stride, S.padding, S.dilation) ==
                        in_image.height &&
                    window_output_size(out_image.width, S.kernel, S.stride, S.padding,
                                       S.dilation) == in_image.width,
                "ConvTranspose2D: the transposed convolution does not map back to the input");

  // PyTorch's fans for this weight shape: [Ci, Co / groups, k, k].
  explicit ConvTranspose2D(const Init& init)
      : weight_(init.weight("weight",
                            {S.in.channels, S.out_channels / S.groups, S.kernel, S.kernel},
                            S.out_channels / S.groups * S.kernel * S.kernel,
                            S.in.channels * S.kernel * S.kernel)) {
    if constexpr (S.bias) bias_ = init.constant("bias", {S.out_channels}, 0.0f);
  }

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const std::int64_t rows = check_input_rows(ctx, x, in_dim, "ConvTranspose2D");
    x_ = &x;
    const ConvGeometry g = conv_geometry(rows, out_image, in_image, window);
    y_.resize(image_batch_shape(rows, out_image), ctx.target);
    ctx.k->conv2d_backward_data(ctx.stream, y_.data(), x.data(), weight_.val.data(), bias_value(),
                                g, workspace_.for_geometry(ctx, g));
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const std::int64_t rows = dy.numel() / out_dim;
    const ConvGeometry g = conv_geometry(rows, out_image, in_image, window);
    float* workspace = workspace_.for_geometry(ctx, g);
    // The convolution's weight gradient, its output gradient being this layer's input.
    ctx.k->conv2d_backward_filter(ctx.stream, ctx.grad_mode, weight_.grd.data(), x_->data(),
                                  dy.data(), g, workspace);
    if constexpr (S.bias) {
      ctx.k->conv2d_backward_bias(ctx.stream, ctx.grad_mode, bias_.grd.data(), dy.data(), rows,
                                  out_image.channels, out_image.pixels());
    }
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize(x_->shape(), ctx.target);
    ctx.k->conv2d_forward(ctx.stream, dx_.data(), dy.data(), weight_.val.data(), nullptr, g,
                          workspace);
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    visit(join_name(prefix, "weight"), weight_);
    if constexpr (S.bias) visit(join_name(prefix, "bias"), bias_);
  }

 private:
  const float* bias_value() const {
    if constexpr (S.bias) return bias_.val.data();
    return nullptr;
  }

  Param weight_;  // [Ci, Co / groups, k, k]
  Param bias_;    // [Co], only when S.bias (never visited otherwise)
  const Tensor* x_ = nullptr;  // forward input, read by vjp
  Tensor y_;                   // [rows, Co, Ho, Wo] output
  Tensor dx_;                  // input gradient, in the input's shape
  ConvWorkspace workspace_;
  Tensor empty_;
};

}  // namespace noeira
