// The embedding gradient on the CPU (the lookup is gather_rows). Ids outside the vocabulary are
// skipped, as gather_rows poisons their forward rows. The backward scatter visits rows in order within each column block, so repeated ids
// add up in a fixed order whatever the thread count (no atomics).
#include "kernels/cpu/column_sum.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"

namespace noeira::cpu {

void embedding_backward(Stream, GradMode mode, float* dtable, const float* dy,
                        const std::int32_t* ids, std::int64_t rows, std::int64_t dim,
                        std::int64_t vocab) {
  if (mode == GradMode::Overwrite) fill(nullptr, dtable, 0.0f, vocab * dim);
  parallel_for_column_blocks(rows, dim, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t r = 0; r < rows; ++r) {
      if (ids[r] < 0 || ids[r] >= vocab) continue;
      float* dst = dtable + static_cast<std::int64_t>(ids[r]) * dim;
      const float* src = dy + r * dim;
      for (std::int64_t c = c0; c < c1; ++c) dst[c] += src[c];
    }
  });
}

}  // namespace noeira::cpu
