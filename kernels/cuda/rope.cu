// RoPE on CUDA: one thread per (row, pair), which computes the angle's cosine and sine once and
// turns that pair in every head. Each output element is written by one thread: deterministic.
#include "kernels/attention_math.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"

namespace noeira::cuda {

namespace {

struct RopeTurn {
  float* y;
  const float* x;
  std::int64_t seq, heads, head_dim, start;
  double base, sign;
  bool interleaved;
  __device__ void operator()(std::int64_t index) const {
    const std::int64_t pairs = head_dim / 2;
    const std::int64_t r = index / pairs;
    const std::int64_t i = index % pairs;
    const double angle = sign * attn::rope_angle(start + r % seq, i, head_dim, base);
    double s = 0.0;
    double c = 0.0;
    sincos(angle, &s, &c);
    const std::int64_t row = r * heads * head_dim + attn::rope_first(interleaved, i);
    const std::int64_t stride = attn::rope_stride(interleaved, head_dim);
    for (std::int64_t h = 0; h < heads; ++h) {
      attn::rope_turn(y + row + h * head_dim, x + row + h * head_dim, stride, c, s);
    }
  }
};

}  // namespace

void rope(Stream s, Rotation rotation, const RopeGeometry& g, float* y, const float* x) {
  const double sign = rotation == Rotation::Forward ? 1.0 : -1.0;
  launch_map(s, g.rows * (g.head_dim / 2),
             RopeTurn{y, x, g.seq, g.heads, g.head_dim, g.start, static_cast<double>(g.base), sign,
                      g.pairs == RopePairs::Interleaved});
}

}  // namespace noeira::cuda
