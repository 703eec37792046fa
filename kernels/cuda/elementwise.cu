// Element-wise kernels: one functor each over the shared grid-stride launcher; the activation
// math comes from kernels/activation_math.hpp, as on the CPU.
#include "kernels/activation_math.hpp"
#include "kernels/bf16_math.hpp"
#include "kernels/cuda/bf16_operand.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/error.hpp"

namespace noeira::cuda {

namespace {

struct Fill {
  float* x;
  float value;
  __device__ void operator()(std::int64_t i) const { x[i] = value; }
};

struct Scale {
  float* x;
  float factor;
  __device__ void operator()(std::int64_t i) const { x[i] *= factor; }
};

struct Add {
  float* y;
  const float* a;
  const float* b;
  __device__ void operator()(std::int64_t i) const { y[i] = a[i] + b[i]; }
};

template <class T>
struct Accumulate {
  T* y;
  const T* x;
  __device__ void operator()(std::int64_t i) const { y[i] += x[i]; }
};

template <class T>
void accumulate_as(Stream s, void* y, const void* x, std::int64_t n) {
  launch_map(s, n, Accumulate<T>{static_cast<T*>(y), static_cast<const T*>(x)});
}

struct CopyColumns {
  GradMode mode;
  float* dst;
  std::int64_t dst_stride;
  const float* src;
  std::int64_t src_stride;
  std::int64_t cols;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t r = i / cols;
    const std::int64_t c = i - r * cols;
    const float s = src[r * src_stride + c];
    float& d = dst[r * dst_stride + c];
    d = mode == GradMode::Overwrite ? s : d + s;
  }
};

struct GatedForward {
  float* y;
  const float* x;
  std::int64_t h;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t r = i / h;
    const std::int64_t c = i - r * h;
    y[i] = x[r * 2 * h + c] * x[r * 2 * h + h + c];
  }
};

struct GatedBackward {
  float* dx;
  const float* dy;
  const float* x;
  std::int64_t h;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t r = i / h;
    const std::int64_t c = i - r * h;
    const std::int64_t a = r * 2 * h + c;
    dx[a] = dy[i] * x[a + h];
    dx[a + h] = dy[i] * x[a];
  }
};

struct ActForward {
  Activation act;
  float* y;
  const float* x;
  __device__ void operator()(std::int64_t i) const { y[i] = act::forward(act, x[i]); }
};

struct ActBackward {
  Activation act;
  float* dx;
  const float* dy;
  const float* x;  // may be null when the derivative does not read it
  const float* y;  // may be null when the derivative does not read it
  __device__ void operator()(std::int64_t i) const {
    const float xi = x != nullptr ? x[i] : 0.0f;
    const float yi = y != nullptr ? y[i] : 0.0f;
    dx[i] = dy[i] * act::derivative(act, xi, yi);
  }
};

struct ToBf16 {
  std::uint16_t* y;
  const float* x;
  __device__ void operator()(std::int64_t i) const { y[i] = bf16_bits(x[i]); }
};

struct RoundToBf16 {
  float* y;
  const float* x;
  __device__ void operator()(std::int64_t i) const { y[i] = round_to_bf16(x[i]); }
};

struct FromBf16 {
  GradMode mode;
  float* y;
  const std::uint16_t* x;
  __device__ void operator()(std::int64_t i) const {
    const float v = bf16_value(x[i]);
    y[i] = mode == GradMode::Overwrite ? v : y[i] + v;
  }
};

}  // namespace

void fill(Stream s, float* x, float value, std::int64_t n) { launch_map(s, n, Fill{x, value}); }

void scale(Stream s, float* x, float factor, std::int64_t n) {
  launch_map(s, n, Scale{x, factor});
}

void add(Stream s, float* y, const float* a, const float* b, std::int64_t n) {
  launch_map(s, n, Add{y, a, b});
}

void accumulate(Stream s, float* y, const float* x, std::int64_t n) {
  accumulate_as<float>(s, y, x, n);
}

void accumulate_typed(Stream s, DType dtype, void* y, const void* x, std::int64_t n) {
  switch (dtype) {
    case DType::F32: return accumulate_as<float>(s, y, x, n);
    case DType::F64: return accumulate_as<double>(s, y, x, n);
    case DType::I32: return accumulate_as<std::int32_t>(s, y, x, n);
    case DType::I64: return accumulate_as<std::int64_t>(s, y, x, n);
    case DType::BF16: break;
  }
  NOEIRA_CHECK(false, "accumulate_typed: no ", to_string(dtype), " sums");
}

void to_bf16(Stream s, std::uint16_t* y, const float* x, std::int64_t n) {
  launch_map(s, n, ToBf16{y, x});
}

void round_to_bf16_values(Stream s, float* y, const float* x, std::int64_t n) {
  launch_map(s, n, RoundToBf16{y, x});
}

void from_bf16(Stream s, GradMode mode, float* y, const std::uint16_t* x, std::int64_t n) {
  launch_map(s, n, FromBf16{mode, y, x});
}

void copy_columns(Stream s, GradMode mode, float* dst, std::int64_t dst_stride, const float* src,
                  std::int64_t src_stride, std::int64_t rows, std::int64_t cols) {
  if (cols <= 0) return;
  launch_map(s, rows * cols, CopyColumns{mode, dst, dst_stride, src, src_stride, cols});
}

void gated_product_forward(Stream s, float* y, const float* x, std::int64_t rows, std::int64_t h) {
  if (h <= 0) return;
  launch_map(s, rows * h, GatedForward{y, x, h});
}

void gated_product_backward(Stream s, float* dx, const float* dy, const float* x, std::int64_t rows,
                            std::int64_t h) {
  if (h <= 0) return;
  launch_map(s, rows * h, GatedBackward{dx, dy, x, h});
}

void activation_forward(Stream s, Activation a, float* y, const float* x, std::int64_t n) {
  launch_map(s, n, ActForward{a, y, x});
}

void activation_backward(Stream s, Activation a, float* dx, const float* dy, const float* x,
                         const float* y, std::int64_t n) {
  launch_map(s, n, ActBackward{a, dx, dy, x, y});
}

}  // namespace noeira::cuda
