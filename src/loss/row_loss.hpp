#pragma once
// The one skeleton of the losses that are a sum over rows (cross-entropy, soft cross-entropy,
// MSE, two-hot, Gaussian NLL): check the arguments, run the kernel table's row_loss into a
// per-row buffer, and add the rows' sum to a double that stays in the target's memory, so that a
// training step need not wait for the device to learn its loss. Each loss is a thin instance
// (cross_entropy.hpp, mse.hpp, soft_cross_entropy.hpp, two_hot.hpp, gaussian_nll.hpp) that names
// its tensors and its LossKind.
#include <cstdint>
#include <string_view>

#include "core/context.hpp"
#include "core/tensor.hpp"

namespace noeira {

class RowLoss {
 public:
  // pred [rows, cols] F32 and the target the loss documents. ADDS the SUM over rows of the
  // per-row loss to *loss_sum, one double in ctx.target's memory (a one-element F64 tensor's
  // as<double>(), say), without waiting for the device; writes grad() = grad_scale ·
  // d(sum)/d(pred). Mean over the batch: grad_scale = 1/rows (distributed training passes
  // 1/global_rows).
  void forward_backward(Context& ctx, const Tensor& pred, const Tensor& target, float grad_scale,
                        double* loss_sum);
  // The same sum, without a gradient (evaluation); grad() keeps the last forward_backward's.
  void forward(Context& ctx, const Tensor& pred, const Tensor& target, double* loss_sum);

  // The same two returning the sum on the host: they wait for the device to read it back.
  double forward_backward(Context& ctx, const Tensor& pred, const Tensor& target,
                          float grad_scale);
  double forward(Context& ctx, const Tensor& pred, const Tensor& target);

  // [rows, cols] gradient of the last forward_backward.
  const Tensor& grad() const { return grad_; }

 protected:
  // What distinguishes one row loss from another. The names appear in error messages.
  struct Spec {
    LossKind kind;
    std::string_view name;         // the loss: "CrossEntropyLoss"
    std::string_view pred_name;    // "logits", "pred"
    std::string_view target_name;  // "labels", "targets", "target"
    std::int64_t ignore_index = kNoIgnoreIndex;  // cross-entropy only
    float bin_low = 0.0f, bin_high = 1.0f;       // two-hot only
    float variance_floor = 1e-6f;                // Gaussian NLL only
  };
  explicit RowLoss(const Spec& spec) : spec_(spec) {}

 private:
  // Checks pred and target and returns the kernel's arguments for them, without the outputs.
  RowLossArgs inputs(const Context& ctx, const Tensor& pred, const Tensor& target) const;
  void run(Context& ctx, RowLossArgs args, double* loss_sum);
  // host_sum_ on ctx.target, zeroed.
  double* zeroed_host_sum(const Context& ctx);

  Spec spec_;
  Tensor row_loss_;  // [rows] per-row loss
  Tensor grad_;      // [rows, cols] d loss / d pred, scaled
  Tensor host_sum_;  // [1] F64: the accumulator of the host-returning calls
};

}  // namespace noeira
