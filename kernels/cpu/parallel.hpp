#pragma once
// OpenMP loops with a size threshold: tiny loops run serially, because waking a thread team costs
// more than the work. Results never depend on the thread count (no reductions here).
#include <omp.h>

#include <cstdint>

namespace noeira::cpu {

constexpr std::int64_t kParallelGrain = 1 << 14;  // elements below which a loop stays serial

template <class Body>
void parallel_for(std::int64_t n, Body&& body) {
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (std::int64_t i = 0; i < n; ++i) body(i);
}

// body(i0, i1) over consecutive chunks of [0, n) (one per thread, static), for bodies that loop
// themselves (a vectorized loop per chunk, see vector_isa.hpp). Elements never depend on the
// chunking.
template <class Body>
void parallel_for_chunks(std::int64_t n, Body&& body) {
  if (n <= 0) return;
#pragma omp parallel if (n >= kParallelGrain)
  {
    const std::int64_t threads = omp_get_num_threads();
    const std::int64_t t = omp_get_thread_num();
    const std::int64_t per = (n + threads - 1) / threads;
    const std::int64_t i0 = t * per < n ? t * per : n;
    const std::int64_t i1 = i0 + per < n ? i0 + per : n;
    if (i0 < i1) body(i0, i1);
  }
}

// One iteration per row of `cols` elements.
template <class Body>
void parallel_for_rows(std::int64_t rows, std::int64_t cols, Body&& body) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain && rows > 1)
  for (std::int64_t r = 0; r < rows; ++r) body(r);
}

}  // namespace noeira::cpu
