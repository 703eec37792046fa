#pragma once
// Mean squared error per row: the per-row loss is Σ_c (pred_c - target_c)² / cols.
#include "core/context.hpp"
#include "core/tensor.hpp"

namespace noeira {

class MSELoss {
 public:
  // pred and target [rows, cols] F32. Returns the SUM over rows of the per-row loss (double);
  // writes grad() = grad_scale * d(sum)/d(pred). With grad_scale = 1/rows this is the mean over
  // all elements, as torch.nn.MSELoss computes it.
  double forward_backward(Context& ctx, const Tensor& pred, const Tensor& target,
                          float grad_scale);
  // The same sum, without a gradient (evaluation); grad() keeps the last forward_backward's.
  double forward(Context& ctx, const Tensor& pred, const Tensor& target);
  // [rows, cols] gradient of the last forward_backward.
  const Tensor& grad() const { return grad_; }

 private:
  double run(Context& ctx, const Tensor& pred, const Tensor& target, float* grad,
             float grad_scale);

  Tensor row_loss_;  // [rows] per-row loss
  Tensor grad_;      // [rows, cols] d loss / d pred, scaled
};

}  // namespace noeira
