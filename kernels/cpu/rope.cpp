// RoPE on the CPU: parallel over rows; in each row the angle's cosine and sine are computed once
// per pair and applied to every head.
#include <cmath>

#include "kernels/attention_math.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"

namespace noeira::cpu {

void rope(Stream, Rotation rotation, const RopeGeometry& g, float* y, const float* x) {
  const std::int64_t width = g.heads * g.head_dim;
  const double sign = rotation == Rotation::Forward ? 1.0 : -1.0;
  const bool interleaved = g.pairs == RopePairs::Interleaved;
  const std::int64_t stride = attn::rope_stride(interleaved, g.head_dim);
  parallel_for_rows(g.rows, width, [&](std::int64_t r) {
    const std::int64_t position = g.start + r % g.seq;
    for (std::int64_t i = 0; i < g.head_dim / 2; ++i) {
      const double angle = sign * attn::rope_angle(position, i, g.head_dim, g.base);
      const double c = std::cos(angle);
      const double s = std::sin(angle);
      for (std::int64_t h = 0; h < g.heads; ++h) {
        const std::int64_t at = r * width + h * g.head_dim + attn::rope_first(interleaved, i);
        attn::rope_turn(y + at, x + at, stride, c, s);
      }
    }
  });
}

}  // namespace noeira::cpu
