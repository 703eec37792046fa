#pragma once
// Sums over rows for parameter gradients (norm scales, embedding tables): parallel over blocks of
// columns, and within a block the rows are visited in order. Every column is then summed in row
// order by one thread, so the result is the same for any thread count.
#include <cstdint>

#include "kernels/cpu/parallel.hpp"

namespace noeira::cpu {

constexpr std::int64_t kColumnBlock = 64;  // columns per task: a few cache lines of a row

// body(c0, c1) handles columns [c0, c1) for all rows, in row order.
template <class Body>
void parallel_for_column_blocks(std::int64_t rows, std::int64_t cols, Body&& body) {
  const std::int64_t blocks = (cols + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain && blocks > 1)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t c0 = b * kColumnBlock;
    const std::int64_t c1 = c0 + kColumnBlock < cols ? c0 + kColumnBlock : cols;
    body(c0, c1);
  }
}

}  // namespace noeira::cpu
