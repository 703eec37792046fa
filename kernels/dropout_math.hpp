#pragma once
// The dropout mask, written once for the CPU and CUDA kernels. Whether element (row, col) is kept
// is a pure function of (seed, step, global row, col): it does not depend on the rank layout, the
// thread count or the launch shape, so forward and backward (and every rank count) agree on the
// mask without storing it.
#include <cstdint>

#include "kernels/hd.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/philox.hpp"

namespace noeira {

// One Philox block yields four 32-bit words, so four consecutive elements share one block: the
// element with flat global index i uses word i % 4 of the block at counter i / 4 (stream = step).
NOEIRA_HD float dropout_uniform(const DropoutKey& key, std::int64_t local_row, std::int64_t col,
                                std::int64_t cols) {
  const std::uint64_t index =
      static_cast<std::uint64_t>(key.row_offset + local_row) * static_cast<std::uint64_t>(cols) +
      static_cast<std::uint64_t>(col);
  const philox::Block block = philox::at(key.seed, key.step, index >> 2);
  return philox::to_unit_open(block.v[index & 3u]);
}

// Kept iff the element's uniform in (0, 1) is >= p: p = 0 keeps everything, and the kept
// fraction is 1 - p in expectation.
NOEIRA_HD bool dropout_keep(const DropoutKey& key, float p, std::int64_t local_row,
                            std::int64_t col, std::int64_t cols) {
  return dropout_uniform(key, local_row, col, cols) >= p;
}

// The factor applied to kept elements (inverted dropout: the expectation is unchanged).
// p == 1 drops everything; the scale is then irrelevant and kept finite.
NOEIRA_HD float dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

}  // namespace noeira
