// Pooling and nearest upsampling on the CPU: one loop over the elements each call writes, the
// math per element in kernels/pool_math.hpp (shared with CUDA). Gradients are gathered per input
// element, never scattered, so any thread count gives the same bits.
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/pool_math.hpp"

namespace noeira::cpu {

void pool2d_forward(Stream, Pooling pooling, float* y, std::int32_t* argmax, const float* x,
                    const PoolGeometry& g) {
  parallel_for(g.planes * g.out_h * g.out_w,
               [&](std::int64_t i) { pool::forward_at(pooling, y, argmax, x, g, i); });
}

void pool2d_backward(Stream, Pooling pooling, float* dx, const float* dy,
                     const std::int32_t* argmax, const PoolGeometry& g) {
  parallel_for(g.planes * g.in_h * g.in_w,
               [&](std::int64_t i) { pool::backward_at(pooling, dx, dy, argmax, g, i); });
}

void upsample_nearest_forward(Stream, float* y, const float* x, std::int64_t planes,
                              std::int64_t h, std::int64_t w, std::int64_t scale) {
  parallel_for(planes * h * w * scale * scale,
               [&](std::int64_t i) { pool::upsample_forward_at(y, x, h, w, scale, i); });
}

void upsample_nearest_backward(Stream, float* dx, const float* dy, std::int64_t planes,
                               std::int64_t h, std::int64_t w, std::int64_t scale) {
  parallel_for(planes * h * w,
               [&](std::int64_t i) { pool::upsample_backward_at(dx, dy, h, w, scale, i); });
}

}  // namespace noeira::cpu
