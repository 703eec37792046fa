#pragma once
// Conv2D: a 2-D convolution of NCHW images (PyTorch's Conv2d): y = conv(x, weight) + bias, with a
// square kernel, stride, zero padding, dilation and groups. The spec is a template argument, so
// the output image is known at compile time and impossible specs do not compile.
#include <cstdint>
#include <string_view>

#include "core/module.hpp"
#include "nn/conv_geometry.hpp"
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

template <ConvSpec S>
class Conv2D {
 public:
  static_assert(S.in.channels > 0 && S.in.height > 0 && S.in.width > 0 && S.out_channels > 0,
                "Conv2D: empty input image or no output channels");
  static_assert(S.kernel > 0 && S.stride > 0 && S.dilation > 0 && S.padding >= 0,
                "Conv2D: kernel, stride and dilation must be positive, padding not negative");
  static_assert(S.groups > 0 && S.in.channels % S.groups == 0 && S.out_channels % S.groups == 0,
                "Conv2D: groups must divide the input and the output channels");

  static constexpr int arity = 1;
  static constexpr ImageShape in_image = S.in;
  static constexpr ImageShape out_image{
      S.out_channels, window_output_size(S.in.height, S.kernel, S.stride, S.padding, S.dilation),
      window_output_size(S.in.width, S.kernel, S.stride, S.padding, S.dilation)};
  static_assert(out_image.height >= 1 && out_image.width >= 1,
                "Conv2D: the dilated kernel is larger than the padded image");
  static constexpr std::int64_t in_dim = in_image.numel();
  static constexpr std::int64_t out_dim = out_image.numel();
  static constexpr ConvWindow window{S.kernel, S.stride, S.padding, S.dilation, S.groups};

  // PyTorch's fans: fan_in = Ci / groups · k · k, fan_out = Co · k · k.
  explicit Conv2D(const Init& init)
      : weight_(init.weight("weight",
                            {S.out_channels, S.in.channels / S.groups, S.kernel, S.kernel},
                            S.in.channels / S.groups * S.kernel * S.kernel,
                            S.out_channels * S.kernel * S.kernel)) {
    if constexpr (S.bias) bias_ = init.constant("bias", {S.out_channels}, 0.0f);
  }

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const std::int64_t rows = check_input_rows(ctx, x, in_dim, "Conv2D");
    x_ = &x;
    const ConvGeometry g = conv_geometry(rows, in_image, out_image, window);
    y_.resize(image_batch_shape(rows, out_image), ctx.target);
    ctx.k->conv2d_forward(ctx.stream, y_.data(), x.data(), weight_.val.data(), bias_value(), g,
                          workspace_.for_geometry(ctx, g));
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const std::int64_t rows = dy.numel() / out_dim;
    const ConvGeometry g = conv_geometry(rows, in_image, out_image, window);
    float* workspace = workspace_.for_geometry(ctx, g);
    ctx.k->conv2d_backward_filter(ctx.stream, ctx.grad_mode, weight_.grd.data(), dy.data(),
                                  x_->data(), g, workspace);
    if constexpr (S.bias) {
      ctx.k->conv2d_backward_bias(ctx.stream, ctx.grad_mode, bias_.grd.data(), dy.data(), rows,
                                  out_image.channels, out_image.pixels());
    }
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize(x_->shape(), ctx.target);
    ctx.k->conv2d_backward_data(ctx.stream, dx_.data(), dy.data(), weight_.val.data(), nullptr, g,
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

  Param weight_;  // [Co, Ci / groups, k, k]
  Param bias_;    // [Co], only when S.bias (never visited otherwise)
  const Tensor* x_ = nullptr;  // forward input, read by vjp
  Tensor y_;                   // [rows, Co, Ho, Wo] output
  Tensor dx_;                  // input gradient, in the input's shape
  ConvWorkspace workspace_;
  Tensor empty_;
};

}  // namespace noeira
