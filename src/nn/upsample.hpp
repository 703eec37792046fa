#pragma once
// UpsampleNearest2D<In, Scale>: each pixel of an image batch [rows, C, H, W] repeated in a
// Scale × Scale block, [rows, C, H·Scale, W·Scale] out (PyTorch's interpolate(mode='nearest')
// with an integer scale factor). Its vjp sums the gradient over each block. No parameters; the
// input is any tensor of rows of C·H·W, and the input gradient has the input's shape.
#include <cstdint>
#include <string_view>

#include "core/module.hpp"
#include "nn/image_shape.hpp"

namespace noeira {

template <ImageShape In, std::int64_t Scale>
class UpsampleNearest2D {
  static_assert(In.channels >= 1 && In.height >= 1 && In.width >= 1,
                "UpsampleNearest2D: the image must have at least one channel and pixel");
  static_assert(Scale >= 1, "UpsampleNearest2D: the scale must be at least 1");

 public:
  static constexpr int arity = 1;
  static constexpr ImageShape in_image = In;
  static constexpr ImageShape out_image{In.channels, In.height * Scale, In.width * Scale};
  static constexpr std::int64_t in_dim = in_image.numel();
  static constexpr std::int64_t out_dim = out_image.numel();

  explicit UpsampleNearest2D(const Init&) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    rows_ = check_input_rows(ctx, x, in_dim, "UpsampleNearest2D");
    x_shape_ = x.shape();
    y_.resize(image_batch_shape(rows_, out_image), ctx.target);
    ctx.k->upsample_nearest_forward(ctx.stream, y_.data(), x.data(), rows_ * In.channels,
                                    In.height, In.width, Scale);
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    if (input_grad == InputGrad::Skip) return empty_;
    NOEIRA_CHECK(dy.numel() == rows_ * out_dim, "UpsampleNearest2D: gradient of shape ",
                 shape_string(dy.shape()), " for an output of ", rows_, " rows of ", out_dim);
    dx_.resize(x_shape_, ctx.target);
    ctx.k->upsample_nearest_backward(ctx.stream, dx_.data(), dy.data(), rows_ * In.channels,
                                     In.height, In.width, Scale);
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

 private:
  std::int64_t rows_ = 0;  // images in the last forward
  Shape x_shape_;          // the forward input's shape, given to the input gradient
  Tensor y_;               // [rows, C, H·Scale, W·Scale] output
  Tensor dx_;              // the input gradient, the input's shape
  Tensor empty_;
};

}  // namespace noeira
