#pragma once
// Softmax cross-entropy against a scalar encoded as two neighbouring bins (DreamerV3's critic and
// reward heads): a regression target of any scale becomes a classification over fixed bins.
#include <cmath>

#include "kernels/error.hpp"
#include "loss/row_loss.hpp"

namespace noeira {

// logits [rows, bins] F32 (bins >= 2) over bins evenly spaced on [bin_low, bin_high], target
// [rows] F32, one scalar per row (RowLoss documents the calls). The scalar, clamped to the range,
// lies between bins k and k + 1 at fraction w; the per-row loss is the soft cross-entropy against
// (1 - w) at k and w at k + 1, so a target on a bin is that bin's one-hot. The gradient reaches
// the logits only. A NaN target gives its row a NaN loss and gradient, never a silent bin.
class TwoHotLoss : public RowLoss {
 public:
  TwoHotLoss(float bin_low, float bin_high) : RowLoss(spec(bin_low, bin_high)) {}

 private:
  static Spec spec(float low, float high) {
    // A NaN or infinite end would put every target at a NaN position.
    if (!(std::isfinite(low) && std::isfinite(high) && low < high)) {
      throw InputError(detail::concat("TwoHotLoss: the bins' range [", low, ", ", high,
                                      "] must be finite with low < high"));
    }
    Spec s{LossKind::TwoHot, "TwoHotLoss", "logits", "target"};
    s.bin_low = low;
    s.bin_high = high;
    return s;
  }
};

}  // namespace noeira
