// Optimizer steps on the CPU: the per-element math of kernels/optimizer_math.hpp over a flat
// buffer (a whole parameter or a shard of one). Elements are independent: thread-count free.
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/vector_isa.hpp"
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
  const AdamCoefficients c = adam_coefficients(hyper);
  parallel_for_chunks(n, [&](std::int64_t i0, std::int64_t i1) {
    // The constants and restrict pointers are the chunk's own locals: through the outlined
    // region's shared captures the compiler would reload the constants every element and give up
    // on vectorizing (the update was a fifth of an MLP step). At the CPU's widest vectors (the
    // SSE2 copy was 8 % of an MLP epoch); sqrt and division are exact in every width.
    with_vector_isa([&] {
      const AdamCoefficients k = c;
      float* __restrict wp = w;
      float* __restrict mp = m;
      float* __restrict vp = v;
      const float* __restrict gp = g;
      for (std::int64_t i = i0; i < i1; ++i) adam_update(wp[i], mp[i], vp[i], gp[i], k);
    });
  });
}

}  // namespace noeira::cpu
