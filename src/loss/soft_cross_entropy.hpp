#pragma once
// Softmax cross-entropy against target distributions (label smoothing, distillation, mixup).
#include "loss/row_loss.hpp"

namespace noeira {

// logits and targets [rows, classes] F32; the per-row loss is -Σ_c target_c · log softmax_c
// (RowLoss documents the calls). Targets are not required to sum to one; the gradient is exact
// for the formula either way.
class SoftCrossEntropyLoss : public RowLoss {
 public:
  SoftCrossEntropyLoss()
      : RowLoss({LossKind::SoftCrossEntropy, "SoftCrossEntropyLoss", "logits", "targets"}) {}
};

}  // namespace noeira
