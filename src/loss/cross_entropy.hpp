#pragma once
// Softmax cross-entropy against integer class labels.
#include <cstdint>
#include <optional>
#include <string_view>

#include "loss/row_loss.hpp"

namespace noeira {

struct CrossEntropyOptions {
  // A row whose label equals it contributes loss 0 and gradient 0 (torch's ignore_index, for
  // padding tokens); the trainer counts the rows that do count. None: every label is a class.
  std::optional<std::int32_t> ignore_index;
};

// logits [rows, classes] F32, labels [rows] I32; the per-row loss is -log softmax(logits)[label]
// (RowLoss documents the calls). A label outside [0, classes) that is not the ignore index:
//   - on Target::Cpu (labels in host memory, read for free) an InputError naming its row and
//     value;
//   - on Target::Cuda not checked (the data loader validates labels once, at load; reading them
//     back here would make the host wait every step): that row's loss and gradient row are NaN,
//     and nothing is read out of bounds.
class CrossEntropyLoss : public RowLoss {
 public:
  explicit CrossEntropyLoss(CrossEntropyOptions options = {})
      : CrossEntropyLoss(options, "CrossEntropyLoss") {}

 protected:
  // For a loss made of this one (SequenceCrossEntropyLoss), whose name its errors must carry.
  CrossEntropyLoss(CrossEntropyOptions options, std::string_view name)
      : RowLoss({LossKind::CrossEntropy, name, "logits", "labels",
                 options.ignore_index ? *options.ignore_index : kNoIgnoreIndex}) {}
};

}  // namespace noeira
