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

void adam_step(Stream, float* w, float* m, float* v, const float* g, std::int64_t n,
               AdamHyper hyper) {
  parallel_for(n, [&](std::int64_t i) { adam_update(w[i], m[i], v[i], g[i], hyper); });
}

}  // namespace noeira::cpu
