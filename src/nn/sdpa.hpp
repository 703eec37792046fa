#pragma once
// ScaledDotProductAttention<Heads, HeadDim, Mask>: y = softmax(q · kᵀ / sqrt(HeadDim) + mask) · v
// per head, a leaf of arity 3 with no parameters.
//
// Layout: q [batch, tq, Heads · HeadDim], k and v [batch, tk, Heads · HeadDim], y like q: the
// activations' own [batch, seq, C] layout, head h in columns [h · HeadDim, (h + 1) · HeadDim).
// The products read the heads in place (a head is a matrix of seq rows at the row stride), so
// nothing is permuted into [batch, heads, seq, head_dim]. Grouped-query attention repeats k and v
// first (RepeatKV): here every query head has its own key and value head.
//
// Masks: Masking::Causal lets the query at position p see keys j <= p, queries being the last tq
// of tk positions (tq = tk in training; after a KV cache's keys otherwise). key_lengths (i32
// [batch] on the target) pads: sequence b sees keys j < key_lengths[b]. A query that sees no key
// gets y = 0. The probabilities [batch, Heads, tq, tk] are kept for the vjp, so memory grows with
// tq · tk (a fused flash-style kernel is later work).
//
// Multi-input convention (core/module.hpp): forward(ctx, q, k, v); vjp returns dq and
// input_grad(1), input_grad(2) return dk and dv. InputGrad::Skip skips all three.
#include <cmath>
#include <cstdint>
#include <string_view>

#include "core/module.hpp"
#include "nn/input_grads.hpp"
#include "nn/sequence_shape.hpp"

namespace noeira {

enum class Masking : std::uint8_t { None, Causal };

// Where attention finds [batch, seq, heads · head_dim] activations: element (b, t, column) at
// data + b · batch_stride + t · row_stride + column. The attention blocks point these into their
// fused projections' outputs (row stride wider than the heads) and into the KV cache.
template <class T>
struct HeadsView {
  T* data = nullptr;
  std::int64_t row_stride = 0;
  std::int64_t batch_stride = 0;
};
using ConstHeads = HeadsView<const float>;
using MutHeads = HeadsView<float>;

// The view of a dense [batch, seq, width] tensor.
inline ConstHeads heads_of(const Tensor& t) {
  return {t.data(), t.dim(2), t.dim(1) * t.dim(2)};
}
inline MutHeads heads_of(Tensor& t) { return {t.data(), t.dim(2), t.dim(1) * t.dim(2)}; }

template <std::int64_t Heads, std::int64_t HeadDim, Masking Mask = Masking::None>
class ScaledDotProductAttention {
  static_assert(Heads > 0 && HeadDim > 0, "ScaledDotProductAttention: empty heads");

 public:
  static constexpr int arity = 3;
  static constexpr std::int64_t in_dim = Heads * HeadDim;
  static constexpr std::int64_t out_dim = Heads * HeadDim;
  static constexpr Masking masking = Mask;

  static float scale() { return 1.0f / std::sqrt(static_cast<float>(HeadDim)); }

  explicit ScaledDotProductAttention(const Init&) {}

  const Tensor& forward(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v) {
    return forward_checked(ctx, q, k, v, nullptr);
  }

  // With a padding mask: key_lengths i32 [batch] on the context's target.
  const Tensor& forward(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& key_lengths) {
    return forward_checked(ctx, q, k, v, &key_lengths);
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    if (input_grad == InputGrad::Skip) {
      have_grads_ = false;
      return empty_;
    }
    dq_.resize({batch_, tq_, in_dim}, ctx.target);
    dk_.resize({batch_, tk_, in_dim}, ctx.target);
    dv_.resize({batch_, tk_, in_dim}, ctx.target);
    vjp_views(ctx, heads_of(dy), heads_of(dq_), heads_of(dk_), heads_of(dv_));
    have_grads_ = true;
    return dq_;
  }

  // The gradient of input i (0: q, 1: k, 2: v) from the last vjp.
  const Tensor& input_grad(int i) const {
    return pick_input_grad("ScaledDotProductAttention", have_grads_, i, {&dq_, &dk_, &dv_});
  }

  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

  // The unchecked entry of the attention blocks: q, k, v read in place; returns y as a dense
  // [batch, tq, in_dim] tensor. The views must stay valid until vjp_views.
  const Tensor& forward_views(Context& ctx, ConstHeads q, ConstHeads k, ConstHeads v,
                              std::int64_t batch, std::int64_t tq, std::int64_t tk,
                              const std::int32_t* key_lengths) {
    q_ = q;
    k_ = k;
    v_ = v;
    batch_ = batch;
    tq_ = tq;
    tk_ = tk;
    p_.resize({batch, Heads, tq, tk}, ctx.target);
    y_.resize({batch, tq, in_dim}, ctx.target);
    // scores = scale · q · kᵀ, then the masked softmax in place: p.
    product(ctx, false, true, tq, tk, HeadDim, scale(), of(q), of(k), scores(p_.data()));
    AttentionMask mask;
    mask.causal = Mask == Masking::Causal;
    mask.key_lengths = key_lengths;
    ctx.k->masked_softmax_forward(ctx.stream, p_.data(), p_.data(), mask, batch, Heads, tq, tk);
    // y = p · v
    product(ctx, false, false, tq, HeadDim, tk, 1.0f, scores<const float>(p_.data()), of(v),
            of(heads_of(y_)));
    return y_;
  }

  // Input gradients of the last forward_views into the given views (overwritten), from dy.
  void vjp_views(Context& ctx, ConstHeads dy, MutHeads dq, MutHeads dk, MutHeads dv) {
    dp_.resize(p_.shape(), ctx.target);
    // dp = dy · vᵀ;  dv = pᵀ · dy
    const MatrixBatch<const float> p = scores<const float>(p_.data());
    const MatrixBatch<const float> ds = scores<const float>(dp_.data());
    product(ctx, false, true, tq_, tk_, HeadDim, 1.0f, of(dy), of(v_), scores(dp_.data()));
    product(ctx, true, false, tk_, HeadDim, tq_, 1.0f, p, of(dy), of(dv));
    // ds = p ⊙ (dp - <dp, p>) in place (the gradient of the scaled scores; 0 where masked).
    ctx.k->softmax_backward(ctx.stream, dp_.data(), dp_.data(), p_.data(), batch_ * Heads * tq_,
                            tk_);
    // dq = scale · ds · k;  dk = scale · dsᵀ · q
    product(ctx, false, false, tq_, HeadDim, tk_, scale(), ds, of(k_), of(dq));
    product(ctx, true, false, tk_, HeadDim, tq_, scale(), ds, of(q_), of(dk));
  }

  // [batch, Heads, tq, tk] attention probabilities of the last forward.
  const Tensor& probabilities() const { return p_; }

 private:
  // The operands of the per-(sequence, head) products: a head's matrix of seq rows at the row
  // stride, head_dim floats after the previous head's, or a [tq, tk] item of the scores.
  template <class T>
  static MatrixBatch<T> of(HeadsView<T> v) {
    return {v.data, v.row_stride, HeadDim, v.batch_stride};
  }
  template <class T>
  MatrixBatch<T> scores(T* s) const {
    return {s, tk_, tq_ * tk_, Heads * tq_ * tk_};
  }

  // c = alpha · op(a) · op(b) for every (sequence, head).
  void product(Context& ctx, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
               std::int64_t k, float alpha, MatrixBatch<const float> a, MatrixBatch<const float> b,
               MatrixBatch<float> c) const {
    ctx.k->batched_matmul(ctx.stream, {.trans_a = trans_a,
                                       .trans_b = trans_b,
                                       .m = m,
                                       .n = n,
                                       .k = k,
                                       .alpha = alpha,
                                       .a = a,
                                       .b = b,
                                       .c = c,
                                       .batch = Heads,
                                       .groups = batch_});
  }

  const Tensor& forward_checked(Context& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor* key_lengths) {
    constexpr std::string_view name = "ScaledDotProductAttention";
    const SeqShape sq = check_sequence_input(ctx, q, in_dim, name, "query");
    const SeqShape sk = check_sequence_input(ctx, k, in_dim, name, "key");
    const SeqShape sv = check_sequence_input(ctx, v, in_dim, name, "value");
    if (sk.batch != sq.batch || sv.batch != sq.batch || sv.seq != sk.seq) {
      throw InputError(detail::concat(name, ": query ", shape_string(q.shape()), ", key ",
                                      shape_string(k.shape()), " and value ",
                                      shape_string(v.shape()),
                                      " disagree (one batch; keys and values of one length)"));
    }
    if (key_lengths != nullptr) check_key_lengths(ctx, *key_lengths, sq.batch, sk.seq, name);
    have_grads_ = false;
    return forward_views(ctx, heads_of(q), heads_of(k), heads_of(v), sq.batch, sq.seq, sk.seq,
                         key_lengths != nullptr ? key_lengths->ids() : nullptr);
  }

  ConstHeads q_, k_, v_;  // the forward's inputs, read by the vjp
  std::int64_t batch_ = 0, tq_ = 0, tk_ = 0;
  Tensor p_;   // [batch, Heads, tq, tk] probabilities (0 where masked)
  Tensor dp_;  // [batch, Heads, tq, tk] scratch: dp, then the scores' gradient in place
  Tensor y_;   // [batch, tq, in_dim] output
  Tensor dq_;  // [batch, tq, in_dim] input gradients of the Tensor entry
  Tensor dk_;  // [batch, tk, in_dim]
  Tensor dv_;  // [batch, tk, in_dim]
  bool have_grads_ = false;
  Tensor empty_;
};

}  // namespace noeira
