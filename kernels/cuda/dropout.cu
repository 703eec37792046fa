// Dropout on CUDA. The mask comes from kernels/dropout_math.hpp (shared with the CPU): a pure
// function of (seed, step, global row, column), regenerated in backward from the same key, so
// nothing is stored and the mask does not depend on the launch shape.
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/dropout_math.hpp"

namespace noeira::cuda {

namespace {

// out = in · mask · scale; each element is read before it is written, so out may alias in.
struct ApplyMask {
  float* out;
  const float* in;
  DropoutKey key;
  float p;
  float scale;
  std::int64_t cols;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t r = i / cols;
    const std::int64_t c = i - r * cols;
    out[i] = dropout_keep(key, p, r, c, cols) ? in[i] * scale : 0.0f;
  }
};

void apply_mask(Stream s, float* out, const float* in, const DropoutKey& key, float p,
                std::int64_t rows, std::int64_t cols) {
  if (cols <= 0) return;
  launch_map(s, rows * cols, ApplyMask{out, in, key, p, dropout_scale(p), cols});
}

}  // namespace

void dropout_forward(Stream s, float* y, const float* x, DropoutKey key, float p,
                     std::int64_t rows, std::int64_t cols) {
  apply_mask(s, y, x, key, p, rows, cols);
}

// The same key as forward: the gradient flows exactly through the elements forward kept.
void dropout_backward(Stream s, float* dx, const float* dy, DropoutKey key, float p,
                      std::int64_t rows, std::int64_t cols) {
  apply_mask(s, dx, dy, key, p, rows, cols);
}

}  // namespace noeira::cuda
