#pragma once
// The parts of a GPT (nn/gpt.hpp), each a module with nanoGPT's parameter names:
//   GptEmbeddings  ids [B, T] -> token embedding (tied to the LM head's table) + learned position
//                  embedding "wpe.weight" [Block, C]
//   GptBlock       pre-LayerNorm transformer block: h = x + attn(ln_1(x)); y = h + mlp(ln_2(h)),
//                  with "ln_1", "attn" (SelfAttention: qkv, proj), "ln_2", "mlp" (0: the GELU
//                  expansion to 4C, 1: the projection back). Causal for a GPT; Masking::None
//                  makes the same block an encoder's (the ViT's, nn/vit.hpp)
//   GptHead        "ln_f" then "lm_head" (LMHead: the [Vocab, C] table the embedding borrows)
// Each has a cached forward for generation (KV cache; no vjp), beside the training path.
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/module.hpp"
#include "nn/embedding.hpp"
#include "nn/feed_forward.hpp"
#include "nn/kv_cache.hpp"
#include "nn/layernorm.hpp"
#include "nn/lm_head.hpp"
#include "nn/self_attention.hpp"

namespace noeira {

template <std::int64_t Vocab, std::int64_t Block, std::int64_t C>
class GptEmbeddings {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = 1;
  static constexpr std::int64_t out_dim = C;

  explicit GptEmbeddings(const Init& init) : tok_(init), wpe_(init.named_child("wpe")) {}

  void tie(Param& table) { tok_.tie(table); }

  // ids [B, T] at positions start .. start + T - 1 (start > 0 only in generation).
  const Tensor& forward(Context& ctx, const Tensor& ids, std::int64_t start = 0) {
    if (ids.rank() != 2) {
      throw InputError(detail::concat("GPT: expected token ids [batch, seq], got shape ",
                                      shape_string(ids.shape())));
    }
    const std::int64_t batch = ids.dim(0), seq = ids.dim(1);
    if (start + seq > Block) {
      throw InputError(detail::concat("GPT: ", seq, " tokens at position ", start,
                                      " exceed the block size ", Block));
    }
    set_positions(ctx, batch, seq, start);
    const Tensor& tok = tok_.forward(ctx, ids);
    const Tensor& pos = wpe_.forward(ctx, positions_);
    y_.resize(tok.shape(), ctx.target);
    ctx.k->add(ctx.stream, y_.data(), tok.data(), pos.data(), tok.numel());
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    wpe_.vjp(ctx, dy, input_grad);  // the position table: per ctx.grad_mode
    return tok_.vjp(ctx, dy, input_grad);  // the tied table: adds to the head's gradient
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    tok_.for_each_param(visit, prefix);  // a borrow, reported to visitors that ask
    wpe_.for_each_param(visit, join_name(prefix, "wpe"));
  }

 private:
  // The position ids of every row, [B, T]: uploaded when the batch shape or start changes.
  void set_positions(Context& ctx, std::int64_t batch, std::int64_t seq, std::int64_t start) {
    if (positions_.defined() && positions_.shape() == Shape{batch, seq} && start == start_ &&
        positions_.target() == ctx.target) {
      return;
    }
    std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * seq));
    for (std::int64_t i = 0; i < batch * seq; ++i) {
      ids[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(start + i % seq);
    }
    positions_ = Tensor::from_host_ids({batch, seq}, ids, ctx.target);
    start_ = start;
  }

  TiedEmbedding<Vocab, C> tok_;
  Embedding<Block, C> wpe_;
  Tensor positions_;  // [B, T] I32
  std::int64_t start_ = 0;
  Tensor y_;  // [B, T, C]
};

template <std::int64_t C, std::int64_t Heads, Masking Mask = Masking::Causal>
class GptBlock {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = C;
  static constexpr std::int64_t out_dim = C;
  using Attention = SelfAttention<C, Heads, Heads, Mask>;

  explicit GptBlock(const Init& init)
      : ln_1_(init.named_child("ln_1")),
        attn_(init.named_child("attn")),
        ln_2_(init.named_child("ln_2")),
        mlp_(init.named_child("mlp")) {
    // Each norm's output goes only into the products of the branch after it.
    static_assert(ReadsInputAsProductOperand<Attention> &&
                  ReadsInputAsProductOperand<FeedForwardGELU<C, 4 * C>>);
    ln_1_.hold_output_in_bf16();
    ln_2_.hold_output_in_bf16();
  }

  const Tensor& forward(Context& ctx, const Tensor& x) {
    return finish(ctx, x, attn_.forward(ctx, ln_1_.forward(ctx, x)));
  }

  // Generation: the attention appends to and reads from `cache`.
  const Tensor& forward_cached(Context& ctx, const Tensor& x, KvCache& cache) {
    return finish(ctx, x, attn_.forward_cached(ctx, ln_1_.forward(ctx, x), cache));
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    // y = h + mlp(ln_2(h)): dh = dy + ln_2ᵀ(mlpᵀ(dy)); h = x + attn(ln_1(x)): dx likewise.
    const Tensor& dh_branch = ln_2_.vjp(ctx, mlp_.vjp(ctx, dy, InputGrad::Compute),
                                        InputGrad::Compute);
    dh_.resize(dy.shape(), ctx.target);
    ctx.k->add(ctx.stream, dh_.data(), dy.data(), dh_branch.data(), dy.numel());
    const Tensor& dx_branch = ln_1_.vjp(ctx, attn_.vjp(ctx, dh_, InputGrad::Compute),
                                        InputGrad::Compute);
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize(dy.shape(), ctx.target);
    ctx.k->add(ctx.stream, dx_.data(), dh_.data(), dx_branch.data(), dy.numel());
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    ln_1_.for_each_param(visit, join_name(prefix, "ln_1"));
    attn_.for_each_param(visit, join_name(prefix, "attn"));
    ln_2_.for_each_param(visit, join_name(prefix, "ln_2"));
    mlp_.for_each_param(visit, join_name(prefix, "mlp"));
  }

 private:
  // h = x + attention; y = h + mlp(ln_2(h)).
  const Tensor& finish(Context& ctx, const Tensor& x, const Tensor& attention) {
    h_.resize(x.shape(), ctx.target);
    ctx.k->add(ctx.stream, h_.data(), x.data(), attention.data(), x.numel());
    const Tensor& m = mlp_.forward(ctx, ln_2_.forward(ctx, h_));
    y_.resize(x.shape(), ctx.target);
    ctx.k->add(ctx.stream, y_.data(), h_.data(), m.data(), x.numel());
    return y_;
  }

  LayerNorm<C> ln_1_;
  Attention attn_;
  LayerNorm<C> ln_2_;
  FeedForwardGELU<C, 4 * C> mlp_;
  Tensor h_;   // [B, T, C] after the attention's residual
  Tensor y_;   // [B, T, C] output
  Tensor dh_;  // [B, T, C] gradient of h
  Tensor dx_;  // [B, T, C] input gradient
  Tensor empty_;
};

template <std::int64_t C, std::int64_t Vocab>
class GptHead {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = C;
  static constexpr std::int64_t out_dim = Vocab;

  explicit GptHead(const Init& init)
      : ln_f_(init.named_child("ln_f")), lm_head_(init.named_child("lm_head")) {}

  Param& table() { return lm_head_.weight(); }

  const Tensor& forward(Context& ctx, const Tensor& x) {
    return lm_head_.forward(ctx, ln_f_.forward(ctx, x));
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    return ln_f_.vjp(ctx, lm_head_.vjp(ctx, dy, InputGrad::Compute), input_grad);
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    ln_f_.for_each_param(visit, join_name(prefix, "ln_f"));
    lm_head_.for_each_param(visit, join_name(prefix, "lm_head"));
  }

 private:
  LayerNorm<C> ln_f_;
  LMHead<C, Vocab> lm_head_;
};

}  // namespace noeira
