#pragma once
// What Conv2D and ConvTranspose2D share. The two are one convolution read in two directions: a
// ConvTranspose2D is the input gradient of the Conv2D from its output image to its input image.
// So they have the same members, the same walk and the same three kernels, with the roles of the
// forward and the input gradient swapped (kernels/kernel_table.hpp):
//
//                  forward                 weight gradient from    input gradient
//   Convolve       conv2d_forward          (dy, x)                 conv2d_backward_data
//   Transpose      conv2d_backward_data    (x, dy)                 conv2d_forward
#include <cstdint>
#include <string_view>

#include "core/module.hpp"
#include "nn/conv_geometry.hpp"
#include "nn/image_shape.hpp"

namespace noeira {

enum class ConvDirection : std::uint8_t { Convolve, Transpose };

// A layer from In to Out images whose convolution has window W and, in the Transpose direction,
// maps Out to In. The weight's shape and fans are the derived layer's (PyTorch's layouts).
template <ConvDirection D, ImageShape In, ImageShape Out, ConvWindow W, bool Bias>
class ConvLayer {
 public:
  static constexpr int arity = 1;
  static constexpr ImageShape in_image = In;
  static constexpr ImageShape out_image = Out;
  static constexpr std::int64_t in_dim = In.numel();
  static constexpr std::int64_t out_dim = Out.numel();

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const std::int64_t rows = check_input_rows(ctx, x, in_dim, layer_name());
    x_ = &x;
    const ConvGeometry g = geometry(rows);
    y_.resize(image_batch_shape(rows, Out), ctx.target);
    float* workspace = workspace_.for_geometry(ctx, g);
    if constexpr (D == ConvDirection::Convolve) {
      ctx.k->conv2d_forward(ctx.stream, y_.data(), x.data(), weight_.val.data(), bias_value(), g,
                            workspace);
    } else {
      ctx.k->conv2d_backward_data(ctx.stream, y_.data(), x.data(), weight_.val.data(),
                                  bias_value(), g, workspace);
    }
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const std::int64_t rows = dy.numel() / out_dim;
    const ConvGeometry g = geometry(rows);
    float* workspace = workspace_.for_geometry(ctx, g);
    // The convolution's weight gradient; transposed, its output gradient is this layer's input.
    const float* conv_dy = D == ConvDirection::Convolve ? dy.data() : x_->data();
    const float* conv_x = D == ConvDirection::Convolve ? x_->data() : dy.data();
    ctx.k->conv2d_backward_filter(ctx.stream, ctx.grad_mode, weight_.grd.data(), conv_dy, conv_x, g,
                                  workspace);
    if constexpr (Bias) {
      ctx.k->conv2d_backward_bias(ctx.stream, ctx.grad_mode, bias_.grd.data(), dy.data(), rows,
                                  Out.channels, Out.pixels());
    }
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize(x_->shape(), ctx.target);
    if constexpr (D == ConvDirection::Convolve) {
      ctx.k->conv2d_backward_data(ctx.stream, dx_.data(), dy.data(), weight_.val.data(), nullptr,
                                  g, workspace);
    } else {
      ctx.k->conv2d_forward(ctx.stream, dx_.data(), dy.data(), weight_.val.data(), nullptr, g,
                            workspace);
    }
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    visit(join_name(prefix, "weight"), weight_);
    if constexpr (Bias) visit(join_name(prefix, "bias"), bias_);
  }

 protected:
  ConvLayer(const Init& init, Shape weight_shape, std::int64_t fan_in, std::int64_t fan_out)
      : weight_(init.weight("weight", weight_shape, fan_in, fan_out)) {
    if constexpr (Bias) bias_ = init.constant("bias", {Out.channels}, 0.0f);
  }

 private:
  static constexpr const char* layer_name() {
    return D == ConvDirection::Convolve ? "Conv2D" : "ConvTranspose2D";
  }
  static ConvGeometry geometry(std::int64_t rows) {
    return D == ConvDirection::Convolve ? conv_geometry(rows, In, Out, W)
                                        : conv_geometry(rows, Out, In, W);
  }
  const float* bias_value() const {
    if constexpr (Bias) return bias_.val.data();
    return nullptr;
  }

  Param weight_;  // Conv2D [Co, Ci / groups, k, k]; ConvTranspose2D [Ci, Co / groups, k, k]
  Param bias_;    // [Co], only with Bias (never visited otherwise)
  const Tensor* x_ = nullptr;  // forward input, read by vjp
  Tensor y_;                   // [rows, Co, Ho, Wo] output
  Tensor dx_;                  // input gradient, in the input's shape
  ConvWorkspace workspace_;
  Tensor empty_;
};

}  // namespace noeira
