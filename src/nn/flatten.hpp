#pragma once
// Flatten<C, H, W>: [rows, C, H, W] (or any shape with C·H·W elements per row) to [rows, C·H·W].
// Both directions are views of the same storage: no copy, no kernel.
#include <cstdint>
#include <string_view>

#include "core/module.hpp"

namespace noeira {

template <std::int64_t C, std::int64_t H, std::int64_t W>
class Flatten {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = C * H * W;
  static constexpr std::int64_t out_dim = C * H * W;

  explicit Flatten(const Init&) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const std::int64_t rows = check_input_rows(ctx, x, in_dim, "Flatten");
    x_shape_ = x.shape();
    y_ = x.view({rows, out_dim});
    return y_;
  }

  const Tensor& vjp(Context&, const Tensor& dy, InputGrad input_grad) {
    if (input_grad == InputGrad::Skip) return empty_;
    NOEIRA_CHECK(dy.numel() == shape_numel(x_shape_), "Flatten: gradient of shape ",
                 shape_string(dy.shape()), " does not match the input's ", shape_string(x_shape_));
    dx_ = dy.view(x_shape_);
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

 private:
  Shape x_shape_;  // the forward input's shape, given back to the input gradient
  Tensor y_;       // [rows, C·H·W] view of the input
  Tensor dx_;      // view of dy in the input's shape
  Tensor empty_;
};

}  // namespace noeira
