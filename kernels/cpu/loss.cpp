// Losses on the CPU: one row per iteration, the row math from kernels/loss_math.hpp. Rows are
// independent, so the results do not depend on the thread count.
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/loss_math.hpp"

namespace noeira::cpu {

void cross_entropy(Stream, float* row_loss, float* dlogits, const float* logits,
                   const std::int32_t* labels, std::int64_t rows, std::int64_t classes,
                   float grad_scale) {
  parallel_for_rows(rows, classes, [&](std::int64_t r) {
    float* d = dlogits != nullptr ? dlogits + r * classes : nullptr;
    row_loss[r] = loss_math::cross_entropy_row(d, logits + r * classes, labels[r], classes,
                                               grad_scale);
  });
}

void soft_cross_entropy(Stream, float* row_loss, float* dlogits, const float* logits,
                        const float* target_probs, std::int64_t rows, std::int64_t classes,
                        float grad_scale) {
  parallel_for_rows(rows, classes, [&](std::int64_t r) {
    float* d = dlogits != nullptr ? dlogits + r * classes : nullptr;
    row_loss[r] = loss_math::soft_cross_entropy_row(d, logits + r * classes,
                                                    target_probs + r * classes, classes,
                                                    grad_scale);
  });
}

void mse(Stream, float* row_loss, float* dpred, const float* pred, const float* target,
         std::int64_t rows, std::int64_t cols, float grad_scale) {
  parallel_for_rows(rows, cols, [&](std::int64_t r) {
    float* d = dpred != nullptr ? dpred + r * cols : nullptr;
    row_loss[r] = loss_math::mse_row(d, pred + r * cols, target + r * cols, cols, grad_scale);
  });
}

std::int64_t count_correct(Stream, const float* logits, const std::int32_t* labels,
                           std::int64_t rows, std::int64_t classes) {
  // An integer sum: exact, so an OpenMP reduction cannot change it.
  std::int64_t correct = 0;
#pragma omp parallel for schedule(static) reduction(+ : correct) \
    if (rows * classes >= kParallelGrain)
  for (std::int64_t r = 0; r < rows; ++r) {
    if (loss_math::row_argmax(logits + r * classes, classes) == labels[r]) ++correct;
  }
  return correct;
}

}  // namespace noeira::cpu
