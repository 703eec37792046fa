// Losses on the CPU: one row per iteration, the row math of kernels/loss_math.hpp walked in
// column order at the CPU's vector width (its exponential is plain arithmetic: the same bits in
// every lane). Rows are independent, so the results do not depend on the thread count.
#include "kernels/activation_math.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/vector_isa.hpp"
#include "kernels/loss_math.hpp"

namespace noeira::cpu {

namespace {

// loss_math's Row on one thread (n > 0).
struct SerialRow {
  std::int64_t n;
  std::int64_t size() const { return n; }
  template <class F>
  float sum(F f) const {
    float s = 0.0f;
    for (std::int64_t c = 0; c < n; ++c) s += f(c);
    return s;
  }
  template <class F>
  float max(F f) const {
    float m = f(0);
    for (std::int64_t c = 1; c < n; ++c) {
      const float v = f(c);
      m = v > m ? v : m;
    }
    return m;
  }
  template <class F>
  void each(F f) const {
    for (std::int64_t c = 0; c < n; ++c) f(c);
  }
  float exp(float d) const { return act::exp_nonpositive(d); }
};

}  // namespace

void row_loss(Stream, LossKind kind, const RowLossArgs& args) {
  if (args.cols <= 0) return;
  parallel_for_rows(args.rows, args.cols, [&](std::int64_t r) {
    with_vector_isa(
        [&] { args.row_loss[r] = loss_math::row_loss(SerialRow{args.cols}, kind, args, r); });
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
