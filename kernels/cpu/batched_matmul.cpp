// Batched matrix products on the CPU: one product (kernels/cpu/gemm.hpp) per item.
//
// Which level runs in parallel: the OpenMP build of OpenBLAS runs single-threaded inside a
// parallel region, so either the items are spread over the threads (each sgemm serial) or they
// run one after another with OpenBLAS's threads inside each. Measured on the 2-core build machine
// (OpenBLAS 0.3.21, 48 items = batch 12 x 4 heads or 8 x 6, best of 40 interleaved runs):
//   T=64,  head dim 32 (q·kᵀ 64x64x32, p·v 64x32x64):  serial 455-500 us, the same with
//     OpenBLAS on 1 thread (it keeps products this small on one thread); over the items
//     240-300 us: 1.7-1.9x faster.
//   T=256, head dim 64 (256x256x64, 256x64x256):        serial 8.8-10.8 ms; over the items
//     7.2-8.4 ms: 1.1-1.5x faster.
//   T=1024, head dim 64, 12 items: 47 ms serial, 44 ms over the items; 1 item: 4.0 ms serial,
//     5.2 ms "over the items" (one thread).
// So the items go wide whenever there are enough to keep every thread busy, or whenever OpenBLAS
// would run each on one thread anyway; only a few big items use OpenBLAS's own threads.
#include <omp.h>

#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/error.hpp"

namespace noeira::cpu {

namespace {

template <class T>
T* item_of(const MatrixBatch<T>& x, std::int64_t group, std::int64_t i) {
  return x.data + group * x.outer_stride + i * x.stride;
}

// OpenBLAS's own bound: a product of at most this many multiply-adds (m·n·k) runs on one thread
// whatever its thread count (SMP_THRESHOLD_MIN 65536 x GEMM_MULTITHREAD_THRESHOLD 4; measured:
// 128x128x16 takes 21.3 us on 1 and on 2 threads, 128x128x17 22.6 us on 1 and 18.0 us on 2).
constexpr std::int64_t kBlasSingleThreadedUpTo = std::int64_t{1} << 18;

}  // namespace

template <Precision P>
void batched_matmul_at(Stream, const BatchedMatmulArgs& g) {
  const std::int64_t items = g.batch * g.groups;
  if (g.m <= 0 || g.n <= 0 || items <= 0) return;
  NOEIRA_CHECK(g.k > 0, "batched_matmul: empty inner dimension (k = ", g.k, ")");
  auto item = [&](std::int64_t index) {
    const std::int64_t group = index / g.batch;
    const std::int64_t i = index % g.batch;
    gemm(P, g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, item_of(g.a, group, i), g.a.ld,
         item_of(g.b, group, i), g.b.ld, g.beta, item_of(g.c, group, i), g.c.ld);
  };
  const bool wide = items > 1 && (items >= omp_get_max_threads() ||
                                  g.m * g.n * g.k <= kBlasSingleThreadedUpTo);
  if (wide) {
#pragma omp parallel for schedule(static)
    for (std::int64_t index = 0; index < items; ++index) item(index);
  } else {
    // Outside any parallel region, so that OpenBLAS may use its threads.
    for (std::int64_t index = 0; index < items; ++index) item(index);
  }
}

NOEIRA_PRODUCT_KERNEL_AT_BOTH_PRECISIONS(batched_matmul_at);

}  // namespace noeira::cpu
