// RoPE on the CPU: parallel over rows; in each row the angle's cosine and sine are computed once
// per pair and applied to every head.
#include <cmath>

#include "kernels/attention_math.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"

namespace noeira::cpu {

void rope(Stream, Rotation rotation, float* y, const float* x, std::int64_t rows,
          std::int64_t seq, std::int64_t heads, std::int64_t head_dim, std::int64_t start,
          float base) {
  const std::int64_t width = heads * head_dim;
  const double sign = rotation == Rotation::Forward ? 1.0 : -1.0;
  parallel_for_rows(rows, width, [&](std::int64_t r) {
    const std::int64_t position = start + r % seq;
    for (std::int64_t i = 0; i < head_dim / 2; ++i) {
      const double angle = sign * attn::rope_angle(position, i, head_dim, base);
      const double c = std::cos(angle);
      const double s = std::sin(angle);
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t at = r * width + h * head_dim + 2 * i;
        attn::rope_turn(y + at, x + at, c, s);
      }
    }
  });
}

}  // namespace noeira::cpu
