#pragma once
// ResNet's BasicBlock (He et al. 2016), in torchvision's layout and names:
//   y = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)),
// conv1 3×3 with the block's stride, conv2 3×3, both without bias; the shortcut is the identity,
// or, when the stride or the width changes, a projection "downsample" = 1×1 conv with the stride
// (no bias) then BatchNorm (downsample.0.*, downsample.1.*). Parameter and buffer names are
// torchvision's: conv1.weight, bn1.{weight,bias,running_mean,running_var,num_batches_tracked},
// conv2.weight, bn2.*, downsample.0.weight, downsample.1.*.
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "core/module.hpp"
#include "nn/activation.hpp"
#include "nn/batchnorm.hpp"
#include "nn/conv2d.hpp"
#include "nn/image_shape.hpp"
#include "nn/sequential.hpp"

namespace noeira {

// The image a 3×3 convolution with padding 1 and `stride` makes of `in` with `channels` outputs.
constexpr ImageShape conv3x3_output(ImageShape in, std::int64_t channels, std::int64_t stride) {
  return {channels, window_output_size(in.height, 3, stride, 1),
          window_output_size(in.width, 3, stride, 1)};
}

template <ImageShape In, std::int64_t Channels, std::int64_t Stride>
class BasicBlock {
 public:
  static constexpr ImageShape in_image = In;
  static constexpr ImageShape out_image = conv3x3_output(In, Channels, Stride);
  static constexpr bool projected = Stride != 1 || In.channels != Channels;
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = In.numel();
  static constexpr std::int64_t out_dim = out_image.numel();

  using Conv1 = Conv2D<ConvSpec{In, Channels, 3, Stride, 1, 1, 1, false}>;
  using Conv2 = Conv2D<ConvSpec{out_image, Channels, 3, 1, 1, 1, 1, false}>;
  using Norm = BatchNorm2D<out_image>;
  using Downsample = Sequential<Conv2D<ConvSpec{In, Channels, 1, Stride, 0, 1, 1, false}>,
                                BatchNorm2D<out_image>>;
  static_assert(Conv1::out_image == out_image && Downsample::out_dim == out_dim);

  explicit BasicBlock(const Init& init)
      : conv1_(init.named_child("conv1")),
        bn1_(init.named_child("bn1")),
        relu1_(init),
        conv2_(init.named_child("conv2")),
        bn2_(init.named_child("bn2")),
        downsample_(init.named_child("downsample")),
        relu_out_(init) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    check_input_rows(ctx, x, in_dim, "BasicBlock");
    const Tensor& main = bn2_.forward(
        ctx, conv2_.forward(ctx, relu1_.forward(ctx, bn1_.forward(ctx, conv1_.forward(ctx, x)))));
    const Tensor* shortcut = &x;
    if constexpr (projected) shortcut = &downsample_.forward(ctx, x);
    sum_.resize(main.shape(), ctx.target);
    ctx.k->add(ctx.stream, sum_.data(), main.data(), shortcut->data(), main.numel());
    return relu_out_.forward(ctx, sum_);
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const Tensor& dsum = relu_out_.vjp(ctx, dy, InputGrad::Compute);
    const Tensor& dmain = conv1_.vjp(
        ctx,
        bn1_.vjp(ctx,
                 relu1_.vjp(ctx,
                            conv2_.vjp(ctx, bn2_.vjp(ctx, dsum, InputGrad::Compute),
                                       InputGrad::Compute),
                            InputGrad::Compute),
                 InputGrad::Compute),
        input_grad);
    if constexpr (projected) {
      const Tensor& dshort = downsample_.vjp(ctx, dsum, input_grad);
      if (input_grad == InputGrad::Skip) return empty_;
      dx_.resize(dmain.shape(), ctx.target);
      ctx.k->add(ctx.stream, dx_.data(), dmain.data(), dshort.data(), dmain.numel());
    } else {
      if (input_grad == InputGrad::Skip) return empty_;
      dx_.resize(dmain.shape(), ctx.target);
      ctx.k->add(ctx.stream, dx_.data(), dmain.data(), dsum.data(), dmain.numel());
    }
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    conv1_.for_each_param(visit, join_name(prefix, "conv1"));
    bn1_.for_each_param(visit, join_name(prefix, "bn1"));
    conv2_.for_each_param(visit, join_name(prefix, "conv2"));
    bn2_.for_each_param(visit, join_name(prefix, "bn2"));
    if constexpr (projected) downsample_.for_each_param(visit, join_name(prefix, "downsample"));
  }

 private:
  // An identity block holds no projection: an empty stand-in keeps the members uniform.
  struct NoDownsample {
    explicit NoDownsample(const Init&) {}
    template <class Visitor>
    void for_each_param(Visitor&&, std::string_view) {}
  };

  Conv1 conv1_;
  Norm bn1_;
  ReLU<out_dim> relu1_;
  Conv2 conv2_;
  Norm bn2_;
  std::conditional_t<projected, Downsample, NoDownsample> downsample_;
  ReLU<out_dim> relu_out_;
  Tensor sum_;  // main + shortcut, before the last ReLU
  Tensor dx_;
  Tensor empty_;
};

}  // namespace noeira
