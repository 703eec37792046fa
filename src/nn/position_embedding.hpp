#pragma once
// PositionEmbedding<Positions, Width>: y[b, t] = x[b, t] + pos_embed[0, t] for sequences of
// exactly Positions tokens [batch, Positions, Width] — a learned, absolute position embedding
// added to every sequence, timm's ViT "pos_embed" [1, Positions, Width]. Drawn from N(0, 0.02)
// (timm draws it truncated at 2σ, a difference that does not matter here) and not decayed: it is
// an embedding, not a weight of a product.
//
// Unlike a GPT's position table (an Embedding looked up by position ids), every sequence has all
// Positions positions, so the forward is a broadcast add (copy_columns from a source stride of 0)
// and the table's gradient the sum of dy over the batch (BatchSum).
#include <cstdint>
#include <string_view>

#include "core/module.hpp"
#include "nn/batch_sum.hpp"
#include "nn/sequence_shape.hpp"

namespace noeira {

template <std::int64_t Positions, std::int64_t Width>
class PositionEmbedding {
  static_assert(Positions > 0 && Width > 0, "PositionEmbedding: empty table");

 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = Width;
  static constexpr std::int64_t out_dim = Width;
  static constexpr std::int64_t positions = Positions;

  explicit PositionEmbedding(const Init& init)
      : table_(init.normal("pos_embed", {1, Positions, Width}, 0.0f, 0.02f)) {
    table_.decay = Decay::Skip;
  }

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const SeqShape s = check_sequence_input(ctx, x, Width, "PositionEmbedding");
    if (s.seq != Positions) {
      throw InputError(detail::concat("PositionEmbedding: ", s.seq, " tokens for a table of ",
                                      Positions, " positions (input ", shape_string(x.shape()),
                                      ")"));
    }
    batch_ = s.batch;
    y_.resize(x.shape(), ctx.target);
    ctx.k->copy(ctx.stream, y_.data(), x.data(), static_cast<std::size_t>(x.numel()) * sizeof(float));
    ctx.k->copy_columns(ctx.stream, GradMode::Accumulate, y_.data(), kRow, table_.val.data(), 0,
                        batch_, kRow);
    return y_;
  }

  // dx = dy: the same tensor, returned as it is.
  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    sum_.run(ctx, ctx.grad_mode, table_.grd.data(), dy.data(), batch_, kRow, kRow);
    return input_grad == InputGrad::Compute ? dy : empty_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    visit(join_name(prefix, "pos_embed"), table_);
  }

 private:
  static constexpr std::int64_t kRow = Positions * Width;  // one sequence

  Param table_;  // [1, Positions, Width]
  std::int64_t batch_ = 0;
  BatchSum sum_;
  Tensor y_;  // [batch, Positions, Width]
  Tensor empty_;
};

}  // namespace noeira
