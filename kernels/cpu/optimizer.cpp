// Optimizer steps on the CPU: the per-element math of kernels/optimizer_math.hpp over a flat
// buffer (a whole parameter or a shard of one). Elements are independent: thread-count free.
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/optimizer_math.hpp"

namespace noeira::cpu {

void sgd_step(Stream, float* w, float* momentum, const float* g, std::int64_t n, SgdHyper hyper) {
  if (momentum == nullptr) {
    parallel_for(n, [&](std::int64_t i) { sgd_update(w[i], nullptr, g[i], hyper); });
  } else {
    parallel_for(n, [&](std::int64_t i) { sgd_update(w[i], momentum + i, g[i], hyper); });
  }
}

void adam_step(Stream, float* __restrict w, float* __restrict m, float* __restrict v,
               const float* __restrict g, std::int64_t n, AdamHyper hyper) {
  // A plain simd loop rather than parallel_for's lambda: with the restrict pointers and the
  // constants in locals the compiler vectorizes the update (it is a third of an MLP step).
  const AdamCoefficients c = adam_coefficients(hyper);
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
  for (std::int64_t i = 0; i < n; ++i) adam_update(w[i], m[i], v[i], g[i], c);
}

}  // namespace noeira::cpu
