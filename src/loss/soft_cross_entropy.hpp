#pragma once
// Softmax cross-entropy against target distributions (label smoothing, distillation, mixup).
#include "core/context.hpp"
#include "core/tensor.hpp"

namespace noeira {

class SoftCrossEntropyLoss {
 public:
  // logits and targets [rows, classes] F32; the per-row loss is -Σ_c target_c · log softmax_c.
  // Returns the SUM over rows (double); writes grad() = grad_scale * d(sum)/d(logits). Targets
  // are not required to sum to one; the gradient is exact for the formula either way.
  double forward_backward(Context& ctx, const Tensor& logits, const Tensor& targets,
                          float grad_scale);
  // The same sum, without a gradient (evaluation); grad() keeps the last forward_backward's.
  double forward(Context& ctx, const Tensor& logits, const Tensor& targets);
  // [rows, classes] gradient of the last forward_backward.
  const Tensor& grad() const { return grad_; }

 private:
  double run(Context& ctx, const Tensor& logits, const Tensor& targets, float* grad,
             float grad_scale);

  Tensor row_loss_;  // [rows] per-row loss
  Tensor grad_;      // [rows, classes] d loss / d logits, scaled
};

}  // namespace noeira
