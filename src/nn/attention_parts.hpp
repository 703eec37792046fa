#pragma once
// The plumbing the attention blocks share: their projections write q, k and v side by side in
// one packed [rows, width] output, which attention reads in place as column blocks; RoPE and
// RepeatKV need dense tensors, copied out of (and their gradients back into) those blocks.
#include <cstdint>

#include "core/context.hpp"
#include "core/init.hpp"
#include "core/tensor.hpp"
#include "nn/sdpa.hpp"
#include "nn/sequence_shape.hpp"

namespace noeira::attention {

// The widths of an attention block over C channels (the base of the blocks, which name them in
// their public part): Heads query heads of head_dim = C / Heads, KvHeads key and value heads
// (fewer: grouped-query attention), rows of C in and out.
template <std::int64_t C, std::int64_t Heads, std::int64_t KvHeads>
struct HeadSplit {
  static_assert(Heads > 0 && C % Heads == 0, "attention: Heads must divide C");
  static_assert(KvHeads > 0 && Heads % KvHeads == 0, "attention: KvHeads must divide Heads");
  static constexpr std::int64_t in_dim = C;
  static constexpr std::int64_t out_dim = C;
  static constexpr std::int64_t head_dim = C / Heads;
  static constexpr std::int64_t kv_width = KvHeads * head_dim;
  static constexpr bool grouped = KvHeads < Heads;
};

// Stands in for a part a configuration does not use (RoPE of odd head dimensions is no type).
struct Unused {
  explicit Unused(const Init&) {}
};

// Columns [offset, ...) of a packed [batch · seq, packed.dim(1)] tensor as heads.
inline ConstHeads columns(const Tensor& packed, std::int64_t offset, std::int64_t seq) {
  return {packed.data() + offset, packed.dim(1), seq * packed.dim(1)};
}
inline MutHeads columns(Tensor& packed, std::int64_t offset, std::int64_t seq) {
  return {packed.data() + offset, packed.dim(1), seq * packed.dim(1)};
}

// dst [batch, seq, width] = columns [offset, offset + width) of packed; returns dst.
inline const Tensor& copy_out(Context& ctx, Tensor& dst, const Tensor& packed,
                              std::int64_t offset, std::int64_t width, SeqShape s) {
  dst.resize({s.batch, s.seq, width}, ctx.target);
  ctx.k->copy_columns(ctx.stream, GradMode::Overwrite, dst.data(), width, packed.data() + offset,
                      packed.dim(1), s.batch * s.seq, width);
  return dst;
}

// Columns [offset, offset + src's width) of packed = src (any [..., width] tensor).
inline void copy_in(Context& ctx, Tensor& packed, std::int64_t offset, const Tensor& src) {
  const std::int64_t width = src.shape().back();
  ctx.k->copy_columns(ctx.stream, GradMode::Overwrite, packed.data() + offset, packed.dim(1),
                      src.data(), width, src.numel() / width, width);
}

// t resized to shape on the context's target, as heads.
inline MutHeads dense(Context& ctx, Tensor& t, const Shape& shape) {
  t.resize(shape, ctx.target);
  return heads_of(t);
}

}  // namespace noeira::attention
