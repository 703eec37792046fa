#pragma once
// Vit<Shape>: a Vision Transformer (Dosovitskiy et al. 2020, in timm's layout) that classifies
// images [rows, C·H·W] (or [rows, C, H, W]) into logits [rows, classes]:
//   P×P patches -> Width-wide tokens (a strided convolution, nn/patch_embed.hpp)
//   -> a learned class token prepended, a learned position embedding added (N + 1 positions)
//   -> `layers` pre-LayerNorm blocks of multi-head self-attention over all tokens (GptBlock with
//      Masking::None: every token sees every other) and a GELU MLP of 4·Width
//   -> the class token's row -> a final LayerNorm -> a Linear head.
// No dropout.
//
// Units for data-parallel sharding (nn/unit.hpp): the embeddings, every block, the head, as the
// GPT's, so every policy (DDP, ZeRO-1/2/3) shards it block by block.
//
// Parameter names: patch_embed.proj.{weight,bias}, cls_token, pos_embed (timm's), then
// blocks.<i>.{ln_1, attn.qkv, attn.proj, ln_2, mlp.0, mlp.1}.* (the GPT block's, where timm has
// norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2), norm.*, head.*. Weight decay applies to
// the matrices (the patch projection's included), not to biases, LayerNorm scales, the class
// token or the position embedding. The model names its initializer (`initializer`): N(0, 0.02)
// for every matrix, timm's scale (it truncates at 2σ).
#include <cstdint>
#include <string_view>

#include "core/init.hpp"
#include "core/module.hpp"
#include "nn/checkpointed.hpp"
#include "nn/gpt_parts.hpp"
#include "nn/image_shape.hpp"
#include "nn/repeat.hpp"
#include "nn/unit.hpp"
#include "nn/vit_parts.hpp"

namespace noeira {

struct VitShape {
  ImageShape image;
  std::int64_t patch;  // P: patches of P×P pixels, P dividing the height and width
  std::int64_t layers;
  std::int64_t heads;
  std::int64_t width;  // the tokens' width
  std::int64_t classes;
};

template <VitShape S>
class Vit {
  static_assert(S.width % S.heads == 0, "Vit: heads must divide the width");
  static_assert(S.layers > 0 && S.classes > 0, "Vit: no blocks or no classes");

 public:
  using Embeddings = VitEmbeddings<S.image, S.patch, S.width>;
  using Block = GptBlock<S.width, S.heads, Masking::None>;
  using Head = VitHead<S.width, S.classes>;

  static constexpr VitShape shape = S;
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = Embeddings::in_dim;
  static constexpr std::int64_t out_dim = S.classes;
  static constexpr ImageShape in_image = S.image;
  static constexpr std::int64_t tokens = Embeddings::tokens;
  static constexpr InitKind initializer = InitKind::Normal;

  explicit Vit(const Init& init) : embed_(init), blocks_(init.named_child("blocks")), head_(init) {}

  const Tensor& forward(Context& ctx, const Tensor& images) {
    return head_.forward(ctx, blocks_.forward(ctx, embed_.forward(ctx, images)));
  }

  const Tensor& vjp(Context& ctx, const Tensor& dlogits, InputGrad input_grad) {
    return embed_.vjp(ctx, blocks_.vjp(ctx, head_.vjp(ctx, dlogits, InputGrad::Compute),
                                       InputGrad::Compute),
                      input_grad);
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    embed_.for_each_param(visit, prefix);
    blocks_.for_each_param(visit, join_name(prefix, "blocks"));
    head_.for_each_param(visit, prefix);
  }

 private:
  Unit<Embeddings> embed_;
  Repeat<static_cast<std::size_t>(S.layers), Unit<Checkpointed<Block>>> blocks_;
  Unit<Head> head_;
};

}  // namespace noeira
