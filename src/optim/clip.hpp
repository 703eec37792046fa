#pragma once
// Gradient clipping by global norm, in three separable steps so that distributed training can
// allreduce the sum of squares between them:
//   s = grad_sum_squares(model)  ->  (allreduce s)  ->  f = clip_coefficient(sqrt(s), max)
//   ->  scale_grads(model, f) when f < 1.
// clip_grad_norm() is the single-process composition.
#include <cmath>
#include <string>

#include "core/module.hpp"

namespace noeira {

// Σ g² over every parameter gradient: each parameter's sum from the table's deterministic
// reduction, added in walk order in double, so the result is the same for any thread count.
template <Module M>
double grad_sum_squares(M& model, Context& ctx) {
  double total = 0.0;
  for_each_param(model, [&](const std::string&, Param& p) {
    total += ctx.k->sum_squares(ctx.stream, p.grd.data(), p.numel());
  });
  return total;
}

template <Module M>
void scale_grads(M& model, Context& ctx, float factor) {
  for_each_param(model, [&](const std::string&, Param& p) {
    ctx.k->scale(ctx.stream, p.grd.data(), factor, p.numel());
  });
}

// The factor that brings a gradient of this norm to max_norm (1 when it is already below);
// the 1e-6 keeps it finite for a zero norm, as torch.nn.utils.clip_grad_norm_ does.
// max_norm must be positive (InputError otherwise).
inline double clip_coefficient(double norm, double max_norm) {
  if (!(max_norm > 0.0)) {
    throw InputError(detail::concat("gradient clipping: max_norm = ", max_norm,
                                    " must be positive"));
  }
  return norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
}

// Scales every gradient by max_norm / (norm + 1e-6) when the global norm exceeds max_norm.
// Returns the norm before clipping (for logging, and for spotting a diverging run).
template <Module M>
double clip_grad_norm(M& model, Context& ctx, double max_norm) {
  const double norm = std::sqrt(grad_sum_squares(model, ctx));
  const double factor = clip_coefficient(norm, max_norm);
  if (factor < 1.0) scale_grads(model, ctx, static_cast<float>(factor));
  return norm;
}

}  // namespace noeira
