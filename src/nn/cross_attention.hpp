#pragma once
// CrossAttention<C, Heads, Cm, KvHeads>: queries from x [batch, tq, C], keys and values from a
// memory [batch, tk, Cm] (an encoder's output), arity 2, in_dim = out_dim = C.
//
//   q = x · q.weightᵀ + q.bias              [C, C], Heads heads of D = C / Heads
//   kv = memory · kv.weightᵀ + kv.bias      [2 · KvHeads · D, Cm]: k's rows, then v's
//   k, v = RepeatKV(k), RepeatKV(v)         KvHeads < Heads only
//   o = SDPA(q, k, v)                       no causal mask; optional padding of the memory
//   y = o · proj.weightᵀ + proj.bias        [C, C]
//
// Parameters (walk order): q.weight, q.bias, kv.weight, kv.bias, proj.weight, proj.bias.
// Multi-input convention (core/module.hpp): forward(ctx, x, memory [, memory_lengths]); vjp
// returns dx and input_grad(1) the memory's gradient; InputGrad::Skip skips both. Each
// projection writes its parameter gradients before its input gradient.
#include <array>
#include <cstdint>
#include <string_view>

#include "core/module.hpp"
#include "nn/attention_parts.hpp"
#include "nn/linear.hpp"
#include "nn/repeat_kv.hpp"
#include "nn/sdpa.hpp"
#include "nn/sequence_shape.hpp"

namespace noeira {

template <std::int64_t C, std::int64_t Heads, std::int64_t Cm = C, std::int64_t KvHeads = Heads>
class CrossAttention : public attention::HeadSplit<C, Heads, KvHeads> {
  using Split = attention::HeadSplit<C, Heads, KvHeads>;

 public:
  using Split::grouped, Split::head_dim, Split::in_dim, Split::kv_width, Split::out_dim;
  static constexpr int arity = 2;
  static constexpr std::int64_t memory_dim = Cm;
  static constexpr std::array<std::int64_t, 2> input_dims = {C, Cm};  // x, memory

  explicit CrossAttention(const Init& init)
      : q_(init.named_child("q")), kv_(init.named_child("kv")), repeat_k_(init),
        repeat_v_(init), sdpa_(init), proj_(init.named_child("proj")) {}

  const Tensor& forward(Context& ctx, const Tensor& x, const Tensor& memory) {
    return forward_checked(ctx, x, memory, nullptr);
  }

  // memory_lengths i32 [batch]: sequence b attends to its first memory_lengths[b] memory rows.
  const Tensor& forward(Context& ctx, const Tensor& x, const Tensor& memory,
                        const Tensor& memory_lengths) {
    return forward_checked(ctx, x, memory, &memory_lengths);
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const SeqShape s = x_shape_;
    const SeqShape m = memory_shape_;
    const std::int64_t rows = s.batch * s.seq;
    const Tensor& d_o = proj_.vjp(ctx, dy.view({rows, C}), InputGrad::Compute);
    dkv_.resize({m.batch * m.seq, 2 * kv_width}, ctx.target);
    MutHeads dk = attention::columns(dkv_, 0, m.seq);
    MutHeads dv = attention::columns(dkv_, kv_width, m.seq);
    if constexpr (grouped) {
      dk = attention::dense(ctx, dk_, {m.batch, m.seq, C});
      dv = attention::dense(ctx, dv_, {m.batch, m.seq, C});
    }
    dq_.resize({rows, C}, ctx.target);
    sdpa_.vjp_views(ctx, ConstHeads{d_o.data(), C, s.seq * C}, attention::columns(dq_, 0, s.seq),
                    dk, dv);
    if constexpr (grouped) {
      attention::copy_in(ctx, dkv_, 0, repeat_k_.vjp(ctx, dk_, InputGrad::Compute));
      attention::copy_in(ctx, dkv_, kv_width, repeat_v_.vjp(ctx, dv_, InputGrad::Compute));
    }
    const Tensor& dmemory = kv_.vjp(ctx, dkv_, input_grad);
    const Tensor& dx = q_.vjp(ctx, dq_, input_grad);
    if (input_grad == InputGrad::Skip) {
      have_grads_ = false;
      return empty_;
    }
    dmemory_ = dmemory.view({m.batch, m.seq, Cm});
    dx_ = dx.view({s.batch, s.seq, C});
    have_grads_ = true;
    return dx_;
  }

  // The gradient of input i (0: x, 1: memory) from the last vjp.
  const Tensor& input_grad(int i) const {
    return pick_input_grad("CrossAttention", have_grads_, i, {&dx_, &dmemory_});
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    q_.for_each_param(visit, join_name(prefix, "q"));
    kv_.for_each_param(visit, join_name(prefix, "kv"));
    proj_.for_each_param(visit, join_name(prefix, "proj"));
  }

  // [batch, Heads, tq, tk] attention probabilities of the last forward.
  const Tensor& probabilities() const { return sdpa_.probabilities(); }

 private:
  const Tensor& forward_checked(Context& ctx, const Tensor& x, const Tensor& memory,
                                const Tensor* lengths) {
    const SeqShape s = check_sequence_input(ctx, x, C, "CrossAttention", "query input");
    const SeqShape m = check_sequence_input(ctx, memory, Cm, "CrossAttention", "memory");
    if (m.batch != s.batch) {
      throw InputError(detail::concat("CrossAttention: the query input ", shape_string(x.shape()),
                                      " and the memory ", shape_string(memory.shape()),
                                      " have different batch sizes"));
    }
    if (lengths != nullptr) check_key_lengths(ctx, *lengths, s.batch, m.seq, "CrossAttention");
    x_shape_ = s;
    memory_shape_ = m;
    have_grads_ = false;
    x_rows_ = x.view({s.batch * s.seq, C});
    memory_rows_ = memory.view({m.batch * m.seq, Cm});
    const Tensor& q = q_.forward(ctx, x_rows_);
    const Tensor& kv = kv_.forward(ctx, memory_rows_);
    ConstHeads k = attention::columns(kv, 0, m.seq);
    ConstHeads v = attention::columns(kv, kv_width, m.seq);
    if constexpr (grouped) {
      k = heads_of(repeat_k_.forward(ctx, attention::copy_out(ctx, k_split_, kv, 0, kv_width, m)));
      v = heads_of(
          repeat_v_.forward(ctx, attention::copy_out(ctx, v_split_, kv, kv_width, kv_width, m)));
    }
    const Tensor& o =
        sdpa_.forward_views(ctx, attention::columns(q, 0, s.seq), k, v, s.batch, s.seq, m.seq,
                            lengths != nullptr ? lengths->ids() : nullptr);
    o_rows_ = o.view({s.batch * s.seq, C});
    y_ = proj_.forward(ctx, o_rows_).view({s.batch, s.seq, C});
    return y_;
  }

  Linear<C, C> q_;
  Linear<Cm, 2 * kv_width> kv_;
  RepeatKV<KvHeads, Heads, head_dim> repeat_k_;
  RepeatKV<KvHeads, Heads, head_dim> repeat_v_;
  ScaledDotProductAttention<Heads, head_dim, Masking::None> sdpa_;
  Linear<C, C> proj_;

  SeqShape x_shape_, memory_shape_;  // of the last forward's inputs
  bool have_grads_ = false;
  Tensor x_rows_;       // [batch · tq, C] view of x, read by q_'s vjp
  Tensor memory_rows_;  // [batch · tk, Cm] view of the memory, read by kv_'s vjp
  Tensor k_split_;      // [batch, tk, kv_width] k copied out for RepeatKV
  Tensor v_split_;      // [batch, tk, kv_width] v copied out for RepeatKV
  Tensor o_rows_;       // [batch · tq, C] view of attention's output, read by proj_'s vjp
  Tensor y_;            // [batch, tq, C] view of proj_'s output
  Tensor dkv_;          // [batch · tk, 2 · kv_width] gradient of the kv projection's output
  Tensor dq_;           // [batch · tq, C] gradient of the q projection's output
  Tensor dk_, dv_;      // [batch, tk, C] attention's key and value gradients (grouped only)
  Tensor dx_;           // [batch, tq, C] view of q_'s input gradient
  Tensor dmemory_;      // [batch, tk, Cm] view of kv_'s input gradient
  Tensor empty_;
};

}  // namespace noeira
