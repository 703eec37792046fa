// Pooling and nearest upsampling on CUDA: one thread per element written, the math per element in
// kernels/pool_math.hpp (shared with the CPU). Gradients are gathered per input element, with no
// atomics: each element has one writer and sums in the CPU's order, so the bits are the same for
// any launch shape.
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/pool_math.hpp"

namespace noeira::cuda {

namespace {

struct PoolForward {
  Pooling pooling;
  float* y;
  std::int32_t* argmax;
  const float* x;
  PoolGeometry g;
  __device__ void operator()(std::int64_t i) const {
    pool::forward_at(pooling, y, argmax, x, g, i);
  }
};

struct PoolBackward {
  Pooling pooling;
  float* dx;
  const float* dy;
  const std::int32_t* argmax;
  PoolGeometry g;
  __device__ void operator()(std::int64_t i) const {
    pool::backward_at(pooling, dx, dy, argmax, g, i);
  }
};

struct UpsampleForward {
  float* y;
  const float* x;
  std::int64_t h, w, scale;
  __device__ void operator()(std::int64_t i) const {
    pool::upsample_forward_at(y, x, h, w, scale, i);
  }
};

struct UpsampleBackward {
  float* dx;
  const float* dy;
  std::int64_t h, w, scale;
  __device__ void operator()(std::int64_t i) const {
    pool::upsample_backward_at(dx, dy, h, w, scale, i);
  }
};

}  // namespace

void pool2d_forward(Stream s, Pooling pooling, float* y, std::int32_t* argmax, const float* x,
                    const PoolGeometry& g) {
  launch_map(s, g.planes * g.out_h * g.out_w, PoolForward{pooling, y, argmax, x, g});
}

void pool2d_backward(Stream s, Pooling pooling, float* dx, const float* dy,
                     const std::int32_t* argmax, const PoolGeometry& g) {
  launch_map(s, g.planes * g.in_h * g.in_w, PoolBackward{pooling, dx, dy, argmax, g});
}

void upsample_nearest_forward(Stream s, float* y, const float* x, std::int64_t planes,
                              std::int64_t h, std::int64_t w, std::int64_t scale) {
  launch_map(s, planes * h * w * scale * scale, UpsampleForward{y, x, h, w, scale});
}

void upsample_nearest_backward(Stream s, float* dx, const float* dy, std::int64_t planes,
                               std::int64_t h, std::int64_t w, std::int64_t scale) {
  launch_map(s, planes * h * w, UpsampleBackward{dx, dy, h, w, scale});
}

}  // namespace noeira::cuda
