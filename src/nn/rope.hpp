#pragma once
// RoPE<Heads, HeadDim, Base, Pairs>: rotary position embedding of [batch, seq, Heads · HeadDim]
// activations (each row Heads heads of HeadDim). In every head, pair i of the token at position p
// turns by p · Base^(-2i / HeadDim) radians. Pairs says which two elements pair i is: by default
// (i, i + HeadDim/2), the split halves of GPT-NeoX, Hugging Face's Llama and the system noeira
// follows; RopePairs::Interleaved pairs (2i, 2i+1), as RoFormer and Meta's original LLaMA code do.
// A ported checkpoint computes its own function only under its own pairing. Positions start at
// 0, or at `start` for forward_at, which is how a KV cache embeds new tokens after the cached
// ones. No parameters; the vjp is the inverse rotation.
#include <cstdint>
#include <string_view>

#include "core/module.hpp"
#include "nn/sequence_shape.hpp"

namespace noeira {

template <std::int64_t Heads, std::int64_t HeadDim, std::int64_t Base = 10000,
          RopePairs Pairs = RopePairs::SplitHalves>
class RoPE {
  static_assert(Heads > 0 && HeadDim > 0 && HeadDim % 2 == 0,
                "RoPE: the head dimension must be even (it turns pairs)");

 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = Heads * HeadDim;
  static constexpr std::int64_t out_dim = Heads * HeadDim;
  static constexpr float base = static_cast<float>(Base);

  explicit RoPE(const Init&) {}

  const Tensor& forward(Context& ctx, const Tensor& x) { return forward_at(ctx, x, 0); }

  // Token t of every sequence at position start + t.
  const Tensor& forward_at(Context& ctx, const Tensor& x, std::int64_t start) {
    const SeqShape s = check_sequence_input(ctx, x, in_dim, "RoPE");
    if (start < 0) throw InputError(detail::concat("RoPE: negative start position ", start));
    shape_ = s;
    start_ = start;
    y_.resize(x.shape(), ctx.target);
    ctx.k->rope(ctx.stream, Rotation::Forward, geometry(), y_.data(), x.data());
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize(dy.shape(), ctx.target);
    ctx.k->rope(ctx.stream, Rotation::Inverse, geometry(), dx_.data(), dy.data());
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

 private:
  RopeGeometry geometry() const {
    return {shape_.batch * shape_.seq, shape_.seq, Heads, HeadDim, start_, base, Pairs};
  }

  SeqShape shape_;          // of the forward input
  std::int64_t start_ = 0;  // position of the forward's token 0
  Tensor y_;                // [batch, seq, in_dim] output
  Tensor dx_;               // [batch, seq, in_dim] input gradient
  Tensor empty_;
};

}  // namespace noeira
