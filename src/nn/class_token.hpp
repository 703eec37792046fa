#pragma once
// The ViT's class token (nn/vit.hpp), in and out:
//   ClassToken<Width>     tokens [batch, T, Width] -> [batch, T + 1, Width] with the learned
//                         "cls_token" [1, 1, Width] as every sequence's token 0 (timm's layout
//                         and name; drawn from N(0, 0.02), not decayed: it is an embedding that
//                         every image shares, and decaying it only pulls it towards 0)
//   ClassTokenRow<Width>  [batch, T, Width] -> [batch, Width]: each sequence's token 0, where the
//                         class token ends up after the blocks (the head classifies from it)
// Both are copies of rows at strides (copy_columns); the class token's gradient sums its rows
// over the batch (BatchSum).
#include <cstdint>
#include <string_view>

#include "core/module.hpp"
#include "nn/batch_sum.hpp"
#include "nn/sequence_shape.hpp"

namespace noeira {

template <std::int64_t Width>
class ClassToken {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = Width;
  static constexpr std::int64_t out_dim = Width;

  explicit ClassToken(const Init& init)
      : token_(init.normal("cls_token", {1, 1, Width}, 0.0f, 0.02f)) {
    token_.decay = Decay::Skip;
  }

  const Tensor& forward(Context& ctx, const Tensor& x) {
    shape_ = check_sequence_input(ctx, x, Width, "ClassToken");
    const std::int64_t in_row = shape_.seq * Width, out_row = in_row + Width;
    y_.resize({shape_.batch, shape_.seq + 1, Width}, ctx.target);
    // A source stride of 0 repeats the token in every sequence.
    ctx.k->copy_columns(ctx.stream, GradMode::Overwrite, y_.data(), out_row, token_.val.data(), 0,
                        shape_.batch, Width);
    ctx.k->copy_columns(ctx.stream, GradMode::Overwrite, y_.data() + Width, out_row, x.data(),
                        in_row, shape_.batch, in_row);
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const std::int64_t in_row = shape_.seq * Width, out_row = in_row + Width;
    sum_.run(ctx, ctx.grad_mode, token_.grd.data(), dy.data(), shape_.batch, Width, out_row);
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize({shape_.batch, shape_.seq, Width}, ctx.target);
    ctx.k->copy_columns(ctx.stream, GradMode::Overwrite, dx_.data(), in_row, dy.data() + Width,
                        out_row, shape_.batch, in_row);
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    visit(join_name(prefix, "cls_token"), token_);
  }

 private:
  Param token_;     // [1, 1, Width]
  SeqShape shape_;  // of the last forward's input
  BatchSum sum_;
  Tensor y_;   // [batch, T + 1, Width]
  Tensor dx_;  // [batch, T, Width]
  Tensor empty_;
};

template <std::int64_t Width>
class ClassTokenRow {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = Width;
  static constexpr std::int64_t out_dim = Width;

  explicit ClassTokenRow(const Init&) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    shape_ = check_sequence_input(ctx, x, Width, "ClassTokenRow");
    y_.resize({shape_.batch, Width}, ctx.target);
    ctx.k->copy_columns(ctx.stream, GradMode::Overwrite, y_.data(), Width, x.data(),
                        shape_.seq * Width, shape_.batch, Width);
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize({shape_.batch, shape_.seq, Width}, ctx.target);
    ctx.k->fill(ctx.stream, dx_.data(), 0.0f, dx_.numel());
    ctx.k->copy_columns(ctx.stream, GradMode::Overwrite, dx_.data(), shape_.seq * Width,
                        dy.data(), Width, shape_.batch, Width);
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

 private:
  SeqShape shape_;  // of the last forward's input
  Tensor y_;        // [batch, Width]
  Tensor dx_;       // [batch, T, Width]: 0 but for token 0
  Tensor empty_;
};

}  // namespace noeira
