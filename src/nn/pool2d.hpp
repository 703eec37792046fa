#pragma once
// Pooling leaves over image batches [rows, C, H, W] (nn/image_shape.hpp), PyTorch's semantics:
//  - MaxPool2D<PoolSpec>: max_pool2d (padding is -inf; the gradient goes to the first maximum of
//    each window in row-major order, where the forward found it);
//  - AvgPool2D<PoolSpec>: avg_pool2d with its defaults (count_include_pad, no ceil_mode);
//  - GlobalAvgPool2D<ImageShape>: the mean of each channel's plane (adaptive_avg_pool2d to 1 × 1),
//    output [rows, C], ready for a Linear head.
// No parameters. The input is any tensor of rows of C·H·W ([B, 784] or [B, 1, 28, 28]); the input
// gradient has the input's shape. Every spatial size is checked at compile time.
#include <cstdint>
#include <string_view>

#include "core/module.hpp"
#include "nn/image_shape.hpp"

namespace noeira {

// A square window: kernel × kernel, stride apart, over an image padded by `padding` on each side.
struct PoolSpec {
  ImageShape in;
  std::int64_t kernel;
  std::int64_t stride;
  std::int64_t padding = 0;
};

namespace detail {

// A window with a size per axis: square for MaxPool2D and AvgPool2D, the whole plane for
// GlobalAvgPool2D (whose image need not be square).
struct PoolWindow {
  std::int64_t kernel_h, kernel_w;
  std::int64_t stride_h, stride_w;
  std::int64_t pad_h = 0, pad_w = 0;
};

constexpr PoolWindow square_window(const PoolSpec& s) {
  return {s.kernel, s.kernel, s.stride, s.stride, s.padding, s.padding};
}

// The leaf every pooling is: image In read through windows W, reduced as Kind says.
template <Pooling Kind, ImageShape In, PoolWindow W>
class Pool2D {
  static_assert(In.channels >= 1 && In.height >= 1 && In.width >= 1,
                "pooling: the image must have at least one channel and pixel");
  static_assert(W.kernel_h >= 1 && W.kernel_w >= 1, "pooling: the kernel must be at least 1");
  static_assert(W.stride_h >= 1 && W.stride_w >= 1, "pooling: the stride must be at least 1");
  static_assert(W.pad_h >= 0 && W.pad_w >= 0, "pooling: the padding must not be negative");
  // PyTorch's rule; it also makes every window hold at least one pixel of the image.
  static_assert(2 * W.pad_h <= W.kernel_h && 2 * W.pad_w <= W.kernel_w,
                "pooling: the padding may be at most half the kernel");
  static_assert(In.height + 2 * W.pad_h >= W.kernel_h && In.width + 2 * W.pad_w >= W.kernel_w,
                "pooling: the kernel is larger than the padded image");
  static_assert(In.pixels() <= INT32_MAX, "pooling: max pooling records int32 plane indices");

 public:
  static constexpr int arity = 1;
  static constexpr ImageShape in_image = In;
  static constexpr ImageShape out_image{
      In.channels, window_output_size(In.height, W.kernel_h, W.stride_h, W.pad_h),
      window_output_size(In.width, W.kernel_w, W.stride_w, W.pad_w)};
  static constexpr std::int64_t in_dim = in_image.numel();
  static constexpr std::int64_t out_dim = out_image.numel();

  Pool2D(const Init&, std::string_view name) : name_(name) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    rows_ = check_input_rows(ctx, x, in_dim, name_);
    x_shape_ = x.shape();
    y_.resize(image_batch_shape(rows_, out_image), ctx.target);
    std::int32_t* argmax = nullptr;
    if constexpr (Kind == Pooling::Max) {
      argmax_.resize(y_.shape(), ctx.target);
      argmax = argmax_.ids();
    }
    ctx.k->pool2d_forward(ctx.stream, Kind, y_.data(), argmax, x.data(), geometry());
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    // No parameters: with the input gradient skipped there is nothing to do.
    if (input_grad == InputGrad::Skip) return empty_;
    NOEIRA_CHECK(dy.numel() == rows_ * out_dim, name_, ": gradient of shape ",
                 shape_string(dy.shape()), " for an output of ", rows_, " rows of ", out_dim);
    dx_.resize(x_shape_, ctx.target);
    const std::int32_t* argmax = Kind == Pooling::Max ? argmax_.ids() : nullptr;
    ctx.k->pool2d_backward(ctx.stream, Kind, dx_.data(), dy.data(), argmax, geometry());
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

 private:
  PoolGeometry geometry() const {
    return {.planes = rows_ * In.channels,
            .in_h = In.height,
            .in_w = In.width,
            .out_h = out_image.height,
            .out_w = out_image.width,
            .kernel_h = W.kernel_h,
            .kernel_w = W.kernel_w,
            .stride_h = W.stride_h,
            .stride_w = W.stride_w,
            .pad_h = W.pad_h,
            .pad_w = W.pad_w};
  }

  std::string_view name_;  // the leaf's name, for its error messages
  std::int64_t rows_ = 0;  // images in the last forward
  Shape x_shape_;          // the forward input's shape, given to the input gradient
  Tensor y_;               // [rows, C, out H, out W] output
  // [rows, C, out H, out W] int32 (Max only): where in its plane each output's maximum was, so
  // that vjp routes the gradient without reading the input again.
  Tensor argmax_{Shape{0}, Target::Cpu, DType::I32};
  Tensor dx_;              // the input gradient, the input's shape
  Tensor empty_;
};

}  // namespace detail

template <PoolSpec S>
class MaxPool2D : public detail::Pool2D<Pooling::Max, S.in, detail::square_window(S)> {
  using Base = detail::Pool2D<Pooling::Max, S.in, detail::square_window(S)>;

 public:
  explicit MaxPool2D(const Init& init) : Base(init, "MaxPool2D") {}
};

template <PoolSpec S>
class AvgPool2D : public detail::Pool2D<Pooling::Average, S.in, detail::square_window(S)> {
  using Base = detail::Pool2D<Pooling::Average, S.in, detail::square_window(S)>;

 public:
  explicit AvgPool2D(const Init& init) : Base(init, "AvgPool2D") {}
};

// Average pooling with one window over the whole plane, its [rows, C, 1, 1] output seen as
// [rows, C] (a view: no copy).
template <ImageShape In>
class GlobalAvgPool2D {
  using Pool = detail::Pool2D<Pooling::Average, In,
                              detail::PoolWindow{In.height, In.width, In.height, In.width}>;

 public:
  static constexpr int arity = 1;
  static constexpr ImageShape in_image = In;
  static constexpr ImageShape out_image{In.channels, 1, 1};
  static constexpr std::int64_t in_dim = Pool::in_dim;
  static constexpr std::int64_t out_dim = Pool::out_dim;
  static_assert(Pool::out_image == out_image);

  explicit GlobalAvgPool2D(const Init& init) : pool_(init, "GlobalAvgPool2D") {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const Tensor& planes = pool_.forward(ctx, x);
    y_ = planes.view({planes.dim(0), In.channels});
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    return pool_.vjp(ctx, dy, input_grad);
  }

  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

 private:
  Pool pool_;
  Tensor y_;  // [rows, C] view of the pool's [rows, C, 1, 1] output
};

}  // namespace noeira
