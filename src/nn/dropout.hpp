#pragma once
// Dropout<D, PermilleP>: in Mode::Train each element is zeroed with probability p = PermilleP/1000
// and the kept ones scaled by 1/(1-p); in Mode::Eval it is the identity. p is a template argument
// because the Module concept constructs a module from an Init alone (Dropout<512, 100> is p=0.1).
//
// The mask is counter-based (kernels/dropout_math.hpp): element (row, col) is kept as a pure
// function of (run seed, this layer's path in the network, step, global row, col), where the
// global row is the local row plus this rank's first row (ctx.row_offset samples, each of a
// sequence's samples counting as its T rows). So two dropout layers draw different masks, a
// sharded batch gets the same mask as the whole batch on one rank, and the backward pass
// regenerates the mask rather than storing it.
#include <cstdint>
#include <string_view>

#include "core/hash.hpp"
#include "core/module.hpp"

namespace noeira {

template <std::int64_t D, std::int64_t PermilleP>
class Dropout {
  static_assert(PermilleP >= 0 && PermilleP < 1000,
                "Dropout: p = PermilleP/1000 must be in [0, 1)");

 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = D;
  static constexpr std::int64_t out_dim = D;
  static constexpr float p = static_cast<float>(PermilleP) / 1000.0f;

  explicit Dropout(const Init& init) : layer_key_(fnv1a(init.path())) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const std::int64_t rows = check_input_rows(ctx, x, D, "Dropout");
    mode_ = ctx.mode;
    // ctx.row_offset counts samples (the global batch's rows); a sample of a sequence is several
    // rows ([B, T, D]: T each), so the mask's global row is offset by that many.
    const std::int64_t rows_per_sample = rows / x.dim(0);
    key_ = DropoutKey{ctx.seed ^ layer_key_, ctx.step, ctx.row_offset * rows_per_sample};
    y_.resize(x.shape(), ctx.target);
    if (mode_ == Mode::Eval) {
      ctx.k->copy(ctx.stream, y_.data(), x.data(), bytes_of(x));
    } else {
      ctx.k->dropout_forward(ctx.stream, y_.data(), x.data(), key_, p, rows, D);
    }
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    if (input_grad == InputGrad::Skip) return empty_;
    dx_.resize(dy.shape(), ctx.target);
    // The mode and key of the forward pass, so the same mask is applied.
    if (mode_ == Mode::Eval) {
      ctx.k->copy(ctx.stream, dx_.data(), dy.data(), bytes_of(dy));
    } else {
      ctx.k->dropout_backward(ctx.stream, dx_.data(), dy.data(), key_, p, dy.numel() / D, D);
    }
    return dx_;
  }

  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

 private:
  static std::size_t bytes_of(const Tensor& t) {
    return static_cast<std::size_t>(t.numel()) * sizeof(float);
  }

  std::uint64_t layer_key_;  // hash of this layer's path, mixed into the run seed
  Mode mode_ = Mode::Train;  // of the last forward
  DropoutKey key_;           // of the last forward
  Tensor y_;                 // [rows, D] output
  Tensor dx_;                // [rows, D] input gradient
  Tensor empty_;
};

}  // namespace noeira
