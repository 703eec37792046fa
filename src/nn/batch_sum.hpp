#pragma once
// BatchSum: the gradient of a parameter that is broadcast over a batch (a class token, a position
// table): out[c] = Σ_b in[b · stride + c] for c < cols, written or added per GradMode.
//
// The sum is one matrix product, a row of ones times the [batch, cols] rows (batched_matmul with
// beta 0 or 1), so it needs no kernel of its own and reduces in the product's fixed order: the same
// rows give the same bits on every call, which the ZeRO-equals-DDP contract needs.
#include <cstdint>

#include "core/context.hpp"
#include "core/tensor.hpp"

namespace noeira {

class BatchSum {
 public:
  // batch >= 1 (the callers' sequence checks refuse an empty batch).
  void run(Context& ctx, GradMode mode, float* out, const float* in, std::int64_t batch,
           std::int64_t cols, std::int64_t stride) {
    if (!ones_.defined() || ones_.numel() < batch || ones_.target() != ctx.target) {
      ones_ = Tensor({batch}, ctx.target);
      ctx.k->fill(ctx.stream, ones_.data(), 1.0f, batch);
    }
    ctx.k->batched_matmul(ctx.stream, {.m = 1,
                                       .n = cols,
                                       .k = batch,
                                       .beta = mode == GradMode::Accumulate ? 1.0f : 0.0f,
                                       .a = {ones_.data(), batch, 0, 0},
                                       .b = {in, stride, 0, 0},
                                       .c = {out, cols, 0, 0}});
  }

 private:
  Tensor ones_;  // [at least batch] of 1.0f on the target
};

}  // namespace noeira
