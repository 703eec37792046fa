#pragma once
// Classification accuracy for evaluation.
#include <cstdint>

#include "core/context.hpp"
#include "core/tensor.hpp"

namespace noeira {

// Number of rows of logits [rows, classes] whose arg-max (first one on ties) equals labels[row].
// Labels are checked like CrossEntropyLoss's: on Target::Cpu one outside [0, classes) is an
// InputError; on Target::Cuda it is not checked and never counts as correct.
std::int64_t count_correct(Context& ctx, const Tensor& logits, const Tensor& labels);

}  // namespace noeira
