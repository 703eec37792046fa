#pragma once
// Mean squared error per row: the per-row loss is Σ_c (pred_c - target_c)² / cols.
#include "loss/row_loss.hpp"

namespace noeira {

// pred and target [rows, cols] F32 (RowLoss documents the calls). With grad_scale = 1/rows the
// gradient is that of the mean over all elements, as torch.nn.MSELoss computes it.
class MSELoss : public RowLoss {
 public:
  MSELoss() : RowLoss({LossKind::Mse, "MSELoss", "pred", "target"}) {}
};

}  // namespace noeira
