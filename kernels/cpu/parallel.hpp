#pragma once
// OpenMP loops with a size threshold: tiny loops run serially, because waking a thread team costs
// more than the work. Results never depend on the thread count (no reductions here).
#include <cstdint>

namespace noeira::cpu {

constexpr std::int64_t kParallelGrain = 1 << 14;  // elements below which a loop stays serial

template <class Body>
void parallel_for(std::int64_t n, Body&& body) {
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (std::int64_t i = 0; i < n; ++i) body(i);
}

// One iteration per row of `cols` elements.
template <class Body>
void parallel_for_rows(std::int64_t rows, std::int64_t cols, Body&& body) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain && rows > 1)
  for (std::int64_t r = 0; r < rows; ++r) body(r);
}

}  // namespace noeira::cpu
