#pragma once
// The negative log-likelihood of a Gaussian with a predicted mean and variance per value
// (torch.nn.GaussianNLLLoss, full=False: without the constant ½ log 2π): a regression head that
// also says how sure it is.
#include <cmath>

#include "kernels/error.hpp"
#include "loss/row_loss.hpp"

namespace noeira {

// pred [rows, 2·d] F32, the d means then the d variances of each row, and target [rows, d] F32
// (RowLoss documents the calls). Per row Σ_c ½ (log v_c + (μ_c - target_c)² / v_c) / d with
// v = max(variance, eps), so with grad_scale = 1/rows the loss and the gradients to the means and
// the variances are torch's with reduction='mean'. As in torch, the clamp passes the gradient
// through: a variance below eps gets the gradient at eps, not zero (a head stuck below the floor
// still learns to grow its variance). A negative variance:
//   - on Target::Cpu an InputError naming its row and column (torch raises too);
//   - on Target::Cuda not checked (reading pred back would make the host wait every step): it is
//     clamped to eps like any other small one.
class GaussianNLLLoss : public RowLoss {
 public:
  explicit GaussianNLLLoss(float eps = 1e-6f) : RowLoss(spec(eps)) {}

 private:
  static Spec spec(float eps) {
    // eps <= 0 would let a zero variance reach log 0.
    if (!(std::isfinite(eps) && eps > 0.0f)) {
      throw InputError(
          detail::concat("GaussianNLLLoss: eps (the variance floor) ", eps, " must be > 0"));
    }
    Spec s{LossKind::GaussianNll, "GaussianNLLLoss", "pred", "target"};
    s.variance_floor = eps;
    return s;
  }
};

}  // namespace noeira
