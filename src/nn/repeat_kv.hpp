#pragma once
// RepeatKV<KvHeads, Heads, HeadDim>: grouped-query attention's sharing of key and value heads.
// Each row of KvHeads heads (of HeadDim) becomes a row of Heads heads: output head h is input head
// h / (Heads / KvHeads), so each key/value head serves a run of Heads / KvHeads consecutive query
// heads (torch's repeat_interleave, as in LLaMA's repeat_kv). The vjp sums the gradients of each
// head's copies in a fixed order.
//
// Row-wise: any [..., KvHeads · HeadDim] input ([batch, seq, ...] in the attention blocks; the KV
// cache's time-major [seq, batch, ...] block works the same). Built from copy_columns: a copy (or
// sum) of head-wide column blocks is all it does.
#include <cstdint>
#include <string_view>

#include "core/module.hpp"

namespace noeira {

template <std::int64_t KvHeads, std::int64_t Heads, std::int64_t HeadDim>
class RepeatKV {
  static_assert(KvHeads > 0 && HeadDim > 0 && Heads % KvHeads == 0,
                "RepeatKV: KvHeads must divide Heads");
  static constexpr std::int64_t group = Heads / KvHeads;

 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = KvHeads * HeadDim;
  static constexpr std::int64_t out_dim = Heads * HeadDim;

  explicit RepeatKV(const Init&) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    if (!x.defined() || x.rank() < 2 || x.shape().back() != in_dim || x.numel() == 0) {
      throw InputError(detail::concat("RepeatKV: expected an input of [..., ", in_dim,
                                      "] elements, got shape ",
                                      x.defined() ? shape_string(x.shape()) : "(none)"));
    }
    if (x.target() != ctx.target) {
      throw InputError(detail::concat("RepeatKV: the input is on ", to_string(x.target()),
                                      " but the context runs on ", to_string(ctx.target)));
    }
    Shape out = x.shape();
    out.back() = out_dim;
    y_.resize(out, ctx.target);
    const std::int64_t rows = x.numel() / in_dim;
    for (std::int64_t h = 0; h < Heads; ++h) {
      ctx.k->copy_columns(ctx.stream, GradMode::Overwrite, y_.data() + h * HeadDim, out_dim,
                          x.data() + (h / group) * HeadDim, in_dim, rows, HeadDim);
    }
    in_shape_ = x.shape();
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize(in_shape_, ctx.target);
    const std::int64_t rows = dy.numel() / out_dim;
    // dx head j = dy head j·group + 0, then + the others in order: the same sum on every target.
    for (std::int64_t h = 0; h < Heads; ++h) {
      ctx.k->copy_columns(ctx.stream, h % group == 0 ? GradMode::Overwrite : GradMode::Accumulate,
                          dx_.data() + (h / group) * HeadDim, in_dim, dy.data() + h * HeadDim,
                          out_dim, rows, HeadDim);
    }
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

 private:
  Shape in_shape_;  // of the forward input
  Tensor y_;        // [..., out_dim] output
  Tensor dx_;       // [..., in_dim] input gradient
  Tensor empty_;
};

}  // namespace noeira
