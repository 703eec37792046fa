#pragma once
// SelfAttention<C, Heads, KvHeads, Mask, Pos>: multi-head self-attention over [batch, seq, C]
// activations, arity 1, in_dim = out_dim = C.
//
//   qkv = x · qkv.weightᵀ + qkv.bias        one fused projection, [batch · seq, C + 2 · KvHeads · D]
//   q, k, v = its column blocks             q: Heads heads of D = C / Heads; k, v: KvHeads heads
//   q, k = RoPE(q), RoPE(k)                 Pos = Positions::Rope (split halves) or RopeInterleaved
//   k, v = RepeatKV(k), RepeatKV(v)         KvHeads < Heads only (grouped-query attention)
//   o = SDPA(q, k, v)                       causal by default; optional key padding
//   y = o · proj.weightᵀ + proj.bias        [C, C]
//
// Parameters (walk order): qkv.weight [C + 2·KvHeads·D, C] (rows: q's C, then k's, then v's),
// qkv.bias, proj.weight [C, C], proj.bias; weights [out, in] as torch.nn.Linear, biases 0 at start.
// Attention reads q, k and v in place from the fused output when neither RoPE nor RepeatKV needs a
// dense copy, and writes their gradients back in place the same way.
//
// forward_cached is the generation path: it appends this call's keys and values to a KvCache
// and attends over everything cached, with RoPE at the cached positions. It has no vjp.
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "core/module.hpp"
#include "nn/attention_parts.hpp"
#include "nn/kv_cache.hpp"
#include "nn/linear.hpp"
#include "nn/repeat_kv.hpp"
#include "nn/rope.hpp"
#include "nn/sdpa.hpp"
#include "nn/sequence_shape.hpp"

namespace noeira {

// Rope pairs a head's elements as split halves (Hugging Face's Llama), RopeInterleaved as
// RoFormer does (nn/rope.hpp).
enum class Positions : std::uint8_t { None, Rope, RopeInterleaved };

template <std::int64_t C, std::int64_t Heads, std::int64_t KvHeads = Heads,
          Masking Mask = Masking::Causal, Positions Pos = Positions::None>
class SelfAttention : public attention::HeadSplit<C, Heads, KvHeads> {
  using Split = attention::HeadSplit<C, Heads, KvHeads>;

 public:
  using Split::grouped, Split::head_dim, Split::in_dim, Split::kv_width, Split::out_dim;
  static constexpr int arity = 1;
  static constexpr std::int64_t qkv_width = C + 2 * kv_width;
  static constexpr bool rotary = Pos != Positions::None;
  static constexpr RopePairs rope_pairs =
      Pos == Positions::RopeInterleaved ? RopePairs::Interleaved : RopePairs::SplitHalves;
  // Its input reaches only qkv's products (core/bf16_activation.hpp).
  static constexpr bool input_is_product_operand = true;

  explicit SelfAttention(const Init& init)
      : qkv_(init.named_child("qkv")), rope_q_(init), rope_k_(init), repeat_k_(init),
        repeat_v_(init), sdpa_(init), proj_(init.named_child("proj")) {}

  const Tensor& forward(Context& ctx, const Tensor& x) { return forward_padded(ctx, x, nullptr); }

  // With a padding mask: key_lengths i32 [batch] on the context's target; sequence b attends to
  // its first key_lengths[b] positions (on top of the causal mask, if any).
  const Tensor& forward(Context& ctx, const Tensor& x, const Tensor& key_lengths) {
    return forward_padded(ctx, x, &key_lengths);
  }

  // x [batch, t, C] are the next t tokens of every sequence: their keys and values join the
  // cache (at positions cache.length() ...), and they attend over all cached positions. The
  // cache must have been reset for this batch and width kv_width.
  const Tensor& forward_cached(Context& ctx, const Tensor& x, KvCache& cache) {
    const SeqShape s = check_sequence_input(ctx, x, C, "SelfAttention", "input", true);
    check_cache(ctx, cache, s);
    shape_ = s;
    cached_ = true;
    const std::int64_t start = cache.length();
    const std::int64_t total = start + s.seq;
    const Tensor& qkv = project(ctx, x, s);
    const Qk qk = rotate(ctx, qkv, s, start);
    append(ctx, cache.keys(), qk.k, s, start);
    append(ctx, cache.values(), attention::columns(qkv, C + kv_width, s.seq), s, start);
    cache.advance(s.seq);
    // Sequence b of the time-major cache: rows batch · width apart, starting width · b in.
    ConstHeads k{cache.keys().data(), s.batch * kv_width, kv_width};
    ConstHeads v{cache.values().data(), s.batch * kv_width, kv_width};
    if constexpr (grouped) {
      const Tensor& kr = repeat_k_.forward(ctx, cache.keys().view({total, s.batch, kv_width}));
      const Tensor& vr = repeat_v_.forward(ctx, cache.values().view({total, s.batch, kv_width}));
      k = {kr.data(), s.batch * C, C};
      v = {vr.data(), s.batch * C, C};
    }
    return project_out(ctx, sdpa_.forward_views(ctx, qk.q, k, v, s.batch, s.seq, total, nullptr),
                       s);
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    if (cached_) {
      throw Error("SelfAttention: vjp after forward_cached (the cached path is for inference; "
                  "train with forward)");
    }
    const SeqShape s = shape_;
    const std::int64_t rows = s.batch * s.seq;
    const Tensor& d_o = proj_.vjp(ctx, dy.view({rows, C}), InputGrad::Compute);
    dqkv_.resize({rows, qkv_width}, ctx.target);
    // Where attention writes its input gradients: straight into dqkv's blocks, unless RoPE or
    // RepeatKV has to map them back first.
    MutHeads dq = attention::columns(dqkv_, 0, s.seq);
    MutHeads dk = attention::columns(dqkv_, C, s.seq);
    MutHeads dv = attention::columns(dqkv_, C + kv_width, s.seq);
    if constexpr (rotary) dq = attention::dense(ctx, dq_, {s.batch, s.seq, C});
    if constexpr (rotary || grouped) dk = attention::dense(ctx, dk_, {s.batch, s.seq, C});
    if constexpr (grouped) dv = attention::dense(ctx, dv_, {s.batch, s.seq, C});
    sdpa_.vjp_views(ctx, ConstHeads{d_o.data(), C, s.seq * C}, dq, dk, dv);
    const Tensor* dk_kv = &dk_;  // k's gradient over the KvHeads heads
    if constexpr (grouped) {
      dk_kv = &repeat_k_.vjp(ctx, dk_, InputGrad::Compute);
      attention::copy_in(ctx, dqkv_, C + kv_width, repeat_v_.vjp(ctx, dv_, InputGrad::Compute));
    }
    if constexpr (rotary) {
      attention::copy_in(ctx, dqkv_, 0, rope_q_.vjp(ctx, dq_, InputGrad::Compute));
      attention::copy_in(ctx, dqkv_, C, rope_k_.vjp(ctx, *dk_kv, InputGrad::Compute));
    } else if constexpr (grouped) {
      attention::copy_in(ctx, dqkv_, C, *dk_kv);
    }
    const Tensor& dx = qkv_.vjp(ctx, dqkv_, input_grad);
    if (input_grad == InputGrad::Skip) return empty_;
    dx_ = dx.view({s.batch, s.seq, C});
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    qkv_.for_each_param(visit, join_name(prefix, "qkv"));
    proj_.for_each_param(visit, join_name(prefix, "proj"));
  }

  // [batch, Heads, tq, tk] attention probabilities of the last forward.
  const Tensor& probabilities() const { return sdpa_.probabilities(); }

 private:
  // q and k as attention reads them, after RoPE; k_dense is k as a dense tensor where one exists.
  struct Qk {
    ConstHeads q, k;
    const Tensor* k_dense = nullptr;
  };

  const Tensor& forward_padded(Context& ctx, const Tensor& x, const Tensor* key_lengths) {
    const SeqShape s = check_sequence_input(ctx, x, C, "SelfAttention", "input", true);
    if (key_lengths != nullptr) {
      check_key_lengths(ctx, *key_lengths, s.batch, s.seq, "SelfAttention");
    }
    shape_ = s;
    cached_ = false;
    const Tensor& qkv = project(ctx, x, s);
    Qk qk = rotate(ctx, qkv, s, 0);
    ConstHeads v = attention::columns(qkv, C + kv_width, s.seq);
    if constexpr (grouped) {
      if (qk.k_dense == nullptr) {
        qk.k_dense = &attention::copy_out(ctx, k_split_, qkv, C, kv_width, s);
      }
      qk.k = heads_of(repeat_k_.forward(ctx, *qk.k_dense));
      v = heads_of(repeat_v_.forward(
          ctx, attention::copy_out(ctx, v_split_, qkv, C + kv_width, kv_width, s)));
    }
    return project_out(ctx, sdpa_.forward_views(ctx, qk.q, qk.k, v, s.batch, s.seq, s.seq,
                                                key_lengths != nullptr ? key_lengths->ids()
                                                                       : nullptr),
                       s);
  }

  const Tensor& project(Context& ctx, const Tensor& x, SeqShape s) {
    x_rows_ = x.view({s.batch * s.seq, C});
    return qkv_.forward(ctx, x_rows_);
  }

  Qk rotate(Context& ctx, const Tensor& qkv, SeqShape s, std::int64_t start) {
    Qk qk{attention::columns(qkv, 0, s.seq), attention::columns(qkv, C, s.seq)};
    if constexpr (rotary) {
      qk.q = heads_of(
          rope_q_.forward_at(ctx, attention::copy_out(ctx, q_split_, qkv, 0, C, s), start));
      qk.k_dense =
          &rope_k_.forward_at(ctx, attention::copy_out(ctx, k_split_, qkv, C, kv_width, s), start);
      qk.k = heads_of(*qk.k_dense);
    }
    return qk;
  }

  const Tensor& project_out(Context& ctx, const Tensor& o, SeqShape s) {
    o_rows_ = o.view({s.batch * s.seq, C});
    y_ = proj_.forward(ctx, o_rows_).view({s.batch, s.seq, C});
    return y_;
  }

  void check_cache(const Context& ctx, KvCache& cache, SeqShape s) const {
    if (cache.batch() != s.batch || cache.width() != kv_width ||
        cache.keys().target() != ctx.target) {
      throw InputError(detail::concat("SelfAttention: the KV cache holds ", cache.batch(),
                                      " sequences of width ", cache.width(), " on ",
                                      to_string(cache.keys().target()), "; this layer needs ",
                                      s.batch, " of width ", kv_width, " on ",
                                      to_string(ctx.target), " (KvCache::reset)"));
    }
    if (cache.length() + s.seq > cache.capacity()) {
      throw InputError(detail::concat("SelfAttention: ", s.seq, " new positions after ",
                                      cache.length(), " overflow the KV cache's capacity ",
                                      cache.capacity()));
    }
  }

  // Rows start .. start + seq of every sequence of a time-major cache tensor = src.
  void append(Context& ctx, Tensor& store, ConstHeads src, SeqShape s, std::int64_t start) {
    for (std::int64_t b = 0; b < s.batch; ++b) {
      ctx.k->copy_columns(ctx.stream, GradMode::Overwrite,
                          store.data() + (start * s.batch + b) * kv_width, s.batch * kv_width,
                          src.data + b * src.batch_stride, src.row_stride, s.seq, kv_width);
    }
  }

  Linear<C, qkv_width> qkv_;
  std::conditional_t<rotary, RoPE<Heads, head_dim, 10000, rope_pairs>, attention::Unused> rope_q_;
  std::conditional_t<rotary, RoPE<KvHeads, head_dim, 10000, rope_pairs>, attention::Unused> rope_k_;
  RepeatKV<KvHeads, Heads, head_dim> repeat_k_;
  RepeatKV<KvHeads, Heads, head_dim> repeat_v_;
  ScaledDotProductAttention<Heads, head_dim, Mask> sdpa_;
  Linear<C, C> proj_;

  SeqShape shape_;       // of the last forward's input
  bool cached_ = false;  // the last forward was forward_cached
  Tensor x_rows_;        // [batch · seq, C] view of the input, read by qkv_'s vjp
  Tensor q_split_;       // [batch, seq, C] q copied out for RoPE
  Tensor k_split_;       // [batch, seq, kv_width] k copied out for RoPE or RepeatKV
  Tensor v_split_;       // [batch, seq, kv_width] v copied out for RepeatKV
  Tensor o_rows_;        // [batch · seq, C] view of attention's output, read by proj_'s vjp
  Tensor y_;             // [batch, seq, C] view of proj_'s output
  Tensor dqkv_;          // [batch · seq, qkv_width] gradient of the fused projection's output
  Tensor dq_, dk_, dv_;  // [batch, seq, C] attention's input gradients where not in place
  Tensor dx_;            // [batch, seq, C] view of qkv_'s input gradient
  Tensor empty_;
};

}  // namespace noeira
