#pragma once
// Softmax cross-entropy against integer class labels.
#include "core/context.hpp"
#include "core/tensor.hpp"

namespace noeira {

class CrossEntropyLoss {
 public:
  // logits [rows, classes] F32, labels [rows] I32. Returns the SUM over rows of the per-row loss
  // (double); writes grad() = grad_scale * d(sum)/d(logits). Mean over the batch: grad_scale =
  // 1/rows (distributed training passes 1/global_rows). A label outside [0, classes) throws an
  // InputError naming its row and value.
  double forward_backward(Context& ctx, const Tensor& logits, const Tensor& labels,
                          float grad_scale);
  // The same sum, without a gradient (evaluation); grad() keeps the last forward_backward's.
  double forward(Context& ctx, const Tensor& logits, const Tensor& labels);
  // [rows, classes] gradient of the last forward_backward.
  const Tensor& grad() const { return grad_; }

 private:
  double run(Context& ctx, const Tensor& logits, const Tensor& labels, float* grad,
             float grad_scale);

  Tensor row_loss_;  // [rows] per-row loss
  Tensor grad_;      // [rows, classes] d loss / d logits, scaled
};

}  // namespace noeira
