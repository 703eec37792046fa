#pragma once
// Gpt<Shape>: a decoder-only transformer language model in GPT-2's layout: token ids [B, T] ->
// token + learned position embeddings -> `layers` pre-LayerNorm blocks of causal multi-head
// self-attention and a GELU MLP -> a final LayerNorm -> logits [B, T, vocab] through an LM head
// whose table is the token embedding's (tied: one parameter, visited once as "lm_head.weight",
// its gradient the sum of both uses).
//
// Units for data-parallel sharding (nn/unit.hpp): the embeddings, every block, and the head; the
// embeddings borrow the head's table, so every policy keeps the head unit whole for the step
// (distributed/param_store.hpp, "pinned"). Every block is a checkpoint site (nn/checkpointed.hpp).
//
// Parameter names follow nanoGPT's: wpe.weight, h.<i>.ln_1.*, h.<i>.attn.qkv.*, h.<i>.attn.proj.*,
// h.<i>.ln_2.*, h.<i>.mlp.0.* (c_fc), h.<i>.mlp.1.* (c_proj), ln_f.*, lm_head.weight (= wte).
// Weight decay applies to the matrices and embeddings, not to biases and LayerNorm scales.
// Initialization is GPT-2's: the residual projections scaled by 1/√(2·layers) (below).
//
// The model is not movable: the embedding points at the head's table.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/module.hpp"
#include "nn/checkpointed.hpp"
#include "nn/gpt_parts.hpp"
#include "nn/repeat.hpp"
#include "nn/unit.hpp"

namespace noeira {

struct GptShape {
  std::int64_t vocab;
  std::int64_t block;  // the longest sequence (positions)
  std::int64_t layers;
  std::int64_t heads;
  std::int64_t width;  // C
};

// The KV caches of every layer for generation.
struct GptCache {
  std::vector<KvCache> layers;
  std::int64_t length() const { return layers.empty() ? 0 : layers.front().length(); }
};

template <GptShape S>
class Gpt {
  static_assert(S.width % S.heads == 0, "Gpt: heads must divide the width");

 public:
  static constexpr GptShape shape = S;
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = 1;
  static constexpr std::int64_t out_dim = S.vocab;
  static constexpr std::int64_t vocab = S.vocab;
  static constexpr std::int64_t block = S.block;
  using Block = GptBlock<S.width, S.heads>;

  explicit Gpt(const Init& init) : embed_(init), h_(init.named_child("h")), head_(init) {
    embed_.inner().tie(head_.inner().table());
    scale_residual_projections(init.target());
  }
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  const Tensor& forward(Context& ctx, const Tensor& ids) {
    return head_.forward(ctx, h_.forward(ctx, embed_.forward(ctx, ids)));
  }

  const Tensor& vjp(Context& ctx, const Tensor& dlogits, InputGrad input_grad) {
    return embed_.vjp(ctx, h_.vjp(ctx, head_.vjp(ctx, dlogits, InputGrad::Compute),
                                  InputGrad::Compute),
                      input_grad);
  }

  // Sizes the caches for `batch` sequences of up to `capacity` (<= block) positions.
  void reset_cache(GptCache& cache, Target target, std::int64_t batch,
                   std::int64_t capacity) const {
    cache.layers.resize(static_cast<std::size_t>(S.layers));
    for (KvCache& c : cache.layers) c.reset(target, batch, capacity, Block::Attention::kv_width);
  }

  // Generation: the logits of ids [B, t], the next t tokens of every sequence, after the
  // cache's. No vjp follows; units are not driven (a plain model on one rank).
  const Tensor& forward_cached(Context& ctx, const Tensor& ids, GptCache& cache) {
    const Tensor* x = &embed_.inner().forward(ctx, ids, cache.length());
    for (std::size_t i = 0; i < static_cast<std::size_t>(S.layers); ++i) {
      x = &h_.copy(i).inner().inner().forward_cached(ctx, *x, cache.layers[i]);
    }
    return head_.inner().forward(ctx, *x);
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    embed_.for_each_param(visit, prefix);
    h_.for_each_param(visit, join_name(prefix, "h"));
    head_.for_each_param(visit, prefix);
  }

 private:
  // GPT-2's initialization: the two matrices of a block that write into the residual stream
  // (attention's projection, the MLP's second layer) are drawn with the spec's std / √(2·layers),
  // so that the stream's variance does not grow with depth. Drawn like every matrix, then scaled:
  // the same random stream, the same values for any rank count or policy.
  void scale_residual_projections(Target target) {
    const float factor = 1.0f / std::sqrt(2.0f * static_cast<float>(S.layers));
    h_.for_each_param(
        [&](const std::string& name, Param& p) {
          if (name.ends_with(".attn.proj.weight") || name.ends_with(".mlp.1.weight")) {
            kernels_for(target).scale(nullptr, p.val.data(), factor, p.numel());
          }
        },
        "h");
  }

  Unit<GptEmbeddings<S.vocab, S.block, S.width>> embed_;
  Repeat<static_cast<std::size_t>(S.layers), Unit<Checkpointed<Block>>> h_;
  Unit<GptHead<S.width, S.vocab>> head_;
};

}  // namespace noeira
