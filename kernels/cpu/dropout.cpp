// Dropout on the CPU. The mask comes from kernels/dropout_math.hpp (shared with CUDA) and is
// regenerated in backward from the same key, so nothing is stored between the passes.
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/dropout_math.hpp"

namespace noeira::cpu {

namespace {
// out = in · mask · scale; reading in[c] before writing out[c] lets out alias in.
void apply_mask(float* out, const float* in, const DropoutKey& key, float p, std::int64_t rows,
                std::int64_t cols) {
  const float s = dropout_scale(p);
  parallel_for_rows(rows, cols, [&](std::int64_t r) {
    const float* ir = in + r * cols;
    float* orow = out + r * cols;
    for (std::int64_t c = 0; c < cols; ++c) {
      orow[c] = dropout_keep(key, p, r, c, cols) ? ir[c] * s : 0.0f;
    }
  });
}
}  // namespace

void dropout_forward(Stream, float* y, const float* x, DropoutKey key, float p, std::int64_t rows,
                     std::int64_t cols) {
  apply_mask(y, x, key, p, rows, cols);
}

void dropout_backward(Stream, float* dx, const float* dy, DropoutKey key, float p,
                      std::int64_t rows, std::int64_t cols) {
  apply_mask(dx, dy, key, p, rows, cols);
}

}  // namespace noeira::cpu
