// Pooling and nearest upsampling on the CPU: loops over the elements each call writes, the math
// per element in kernels/pool_math.hpp (shared with CUDA). Gradients are gathered per input
// element, never scattered, so any thread count gives the same bits.
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/pool_math.hpp"

namespace noeira::cpu {

namespace {

// body(kind) with the pooling kind as a constant, so the window loops are compiled for each kind
// instead of testing it in every window.
template <class Body>
void with_pooling(Pooling pooling, Body&& body) {
  if (pooling == Pooling::Max) {
    body(std::integral_constant<Pooling, Pooling::Max>{});
  } else {
    body(std::integral_constant<Pooling, Pooling::Average>{});
  }
}

}  // namespace

// The CPU walks a plane at a time, so an element's window ranges come from its row and column,
// without the divisions that recover them from a flat index (those were most of a pooling
// layer's time); the math and its order are pool_math.hpp's, as on CUDA.
void pool2d_forward(Stream, Pooling kind, float* y, std::int32_t* argmax, const float* x,
                    const PoolGeometry& g) {
  const std::int64_t out_plane = g.out_h * g.out_w;
  with_pooling(kind, [&](auto constant) {
    constexpr Pooling pooling = decltype(constant)::value;
    parallel_for_rows(g.planes, out_plane, [&](std::int64_t p) {
      const float* plane = x + p * g.in_h * g.in_w;
      for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
        const pool::Range rows = pool::window_inputs(oh, g.kernel_h, g.stride_h, g.pad_h, g.in_h);
        const std::int64_t at = p * out_plane + oh * g.out_w;
        for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
          pool::pool_window(pooling, y + at + ow,
                            pooling == Pooling::Max ? argmax + at + ow : nullptr, plane, rows,
                            pool::window_inputs(ow, g.kernel_w, g.stride_w, g.pad_w, g.in_w), g);
        }
      }
    });
  });
}

void pool2d_backward(Stream, Pooling kind, float* dx, const float* dy,
                     const std::int32_t* argmax, const PoolGeometry& g) {
  std::vector<pool::Range> cols(static_cast<std::size_t>(g.in_w));
  for (std::int64_t w = 0; w < g.in_w; ++w) {
    cols[static_cast<std::size_t>(w)] =
        pool::windows_reading(w, g.kernel_w, g.stride_w, g.pad_w, g.out_w);
  }
  const std::int64_t in_plane = g.in_h * g.in_w;
  with_pooling(kind, [&](auto constant) {
    constexpr Pooling pooling = decltype(constant)::value;
    parallel_for_rows(g.planes, in_plane, [&](std::int64_t p) {
      const std::int64_t out_plane = p * g.out_h * g.out_w;
      const std::int32_t* argmax_plane = pooling == Pooling::Max ? argmax + out_plane : nullptr;
      for (std::int64_t h = 0; h < g.in_h; ++h) {
        const pool::Range rows =
            pool::windows_reading(h, g.kernel_h, g.stride_h, g.pad_h, g.out_h);
        float* dx_row = dx + p * in_plane + h * g.in_w;
        for (std::int64_t w = 0; w < g.in_w; ++w) {
          dx_row[w] = pool::gather_window_grads(pooling, dy + out_plane, argmax_plane, rows,
                                                cols[static_cast<std::size_t>(w)],
                                                static_cast<std::int32_t>(h * g.in_w + w), g);
        }
      }
    });
  });
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
