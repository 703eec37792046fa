#pragma once
// The parts of a ViT (nn/vit.hpp) other than its blocks (which are GptBlock's, not causal), each
// a module with timm's parameter names:
//   VitEmbeddings  images [rows, C·H·W] -> tokens [rows, N + 1, Width]: "patch_embed" (PatchEmbed:
//                  proj.weight, proj.bias), the class token "cls_token" prepended, the learned
//                  position embedding "pos_embed" [1, N + 1, Width] added
//   VitHead        tokens [rows, N + 1, Width] -> logits [rows, Classes]: the class token's row,
//                  the final LayerNorm "norm", the Linear "head"
//
// The head takes the class token's row before the LayerNorm, not after: the norm acts on each
// token alone, so normalizing one row gives timm's output and gradients (norm over all tokens,
// then token 0) at 1/(N + 1) of the cost.
#include <cstdint>
#include <string_view>

#include "core/module.hpp"
#include "nn/class_token.hpp"
#include "nn/image_shape.hpp"
#include "nn/layernorm.hpp"
#include "nn/linear.hpp"
#include "nn/patch_embed.hpp"
#include "nn/position_embedding.hpp"

namespace noeira {

template <ImageShape In, std::int64_t Patch, std::int64_t Width>
class VitEmbeddings {
 public:
  using Patches = PatchEmbed<In, Patch, Width>;
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = Patches::in_dim;
  static constexpr std::int64_t out_dim = Width;
  static constexpr ImageShape in_image = In;
  static constexpr std::int64_t tokens = Patches::patches + 1;  // the class token first

  explicit VitEmbeddings(const Init& init)
      : patch_embed_(init.named_child("patch_embed")), cls_token_(init), pos_embed_(init) {}

  const Tensor& forward(Context& ctx, const Tensor& images) {
    return pos_embed_.forward(ctx, cls_token_.forward(ctx, patch_embed_.forward(ctx, images)));
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    return patch_embed_.vjp(
        ctx, cls_token_.vjp(ctx, pos_embed_.vjp(ctx, dy, InputGrad::Compute), InputGrad::Compute),
        input_grad);
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    patch_embed_.for_each_param(visit, join_name(prefix, "patch_embed"));
    cls_token_.for_each_param(visit, prefix);
    pos_embed_.for_each_param(visit, prefix);
  }

 private:
  Patches patch_embed_;
  ClassToken<Width> cls_token_;
  PositionEmbedding<tokens, Width> pos_embed_;
};

template <std::int64_t Width, std::int64_t Classes>
class VitHead {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = Width;
  static constexpr std::int64_t out_dim = Classes;

  explicit VitHead(const Init& init)
      : class_row_(init), norm_(init.named_child("norm")), head_(init.named_child("head")) {}

  const Tensor& forward(Context& ctx, const Tensor& tokens) {
    return head_.forward(ctx, norm_.forward(ctx, class_row_.forward(ctx, tokens)));
  }

  const Tensor& vjp(Context& ctx, const Tensor& dlogits, InputGrad input_grad) {
    return class_row_.vjp(
        ctx, norm_.vjp(ctx, head_.vjp(ctx, dlogits, InputGrad::Compute), InputGrad::Compute),
        input_grad);
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    norm_.for_each_param(visit, join_name(prefix, "norm"));
    head_.for_each_param(visit, join_name(prefix, "head"));
  }

 private:
  ClassTokenRow<Width> class_row_;
  LayerNorm<Width> norm_;
  Linear<Width, Classes> head_;
};

}  // namespace noeira
