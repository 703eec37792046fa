#include "kernels/activation_math.hpp"
#include "kernels/bf16_math.hpp"
#include "kernels/cpu/activation_dispatch.hpp"
#include "kernels/cpu/bf16_rounding.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/vector_isa.hpp"
#include "kernels/error.hpp"

namespace noeira::cpu {

void fill(Stream, float* x, float value, std::int64_t n) {
  parallel_for(n, [&](std::int64_t i) { x[i] = value; });
}

void scale(Stream, float* x, float factor, std::int64_t n) {
  parallel_for(n, [&](std::int64_t i) { x[i] *= factor; });
}

void add(Stream, float* y, const float* a, const float* b, std::int64_t n) {
  parallel_for(n, [&](std::int64_t i) { y[i] = a[i] + b[i]; });
}

namespace {
template <class T>
void accumulate_as(void* y, const void* x, std::int64_t n) {
  T* __restrict yt = static_cast<T*>(y);
  const T* __restrict xt = static_cast<const T*>(x);
  parallel_for(n, [&](std::int64_t i) { yt[i] += xt[i]; });
}
}  // namespace

void accumulate(Stream, float* y, const float* x, std::int64_t n) {
  accumulate_as<float>(y, x, n);
}

void accumulate_typed(Stream, DType dtype, void* y, const void* x, std::int64_t n) {
  switch (dtype) {
    case DType::F32: return accumulate_as<float>(y, x, n);
    case DType::F64: return accumulate_as<double>(y, x, n);
    case DType::I32: return accumulate_as<std::int32_t>(y, x, n);
    case DType::I64: return accumulate_as<std::int64_t>(y, x, n);
    case DType::BF16: break;
  }
  NOEIRA_CHECK(false, "accumulate_typed: no ", to_string(dtype), " sums");
}

void to_bf16(Stream, std::uint16_t* y, const float* x, std::int64_t n) {
  parallel_for_chunks(n, [&](std::int64_t i0, std::int64_t i1) {
    round_to_bf16_bits(y + i0, x + i0, i1 - i0);
  });
}

void from_bf16(Stream, GradMode mode, float* y, const std::uint16_t* x, std::int64_t n) {
  if (mode == GradMode::Overwrite) {
    parallel_for(n, [&](std::int64_t i) { y[i] = bf16_value(x[i]); });
  } else {
    parallel_for(n, [&](std::int64_t i) { y[i] += bf16_value(x[i]); });
  }
}

void copy_columns(Stream, GradMode mode, float* dst, std::int64_t dst_stride, const float* src,
                  std::int64_t src_stride, std::int64_t rows, std::int64_t cols) {
  parallel_for_rows(rows, cols, [&](std::int64_t r) {
    float* d = dst + r * dst_stride;
    const float* s = src + r * src_stride;
    if (mode == GradMode::Overwrite) {
      for (std::int64_t c = 0; c < cols; ++c) d[c] = s[c];
    } else {
      for (std::int64_t c = 0; c < cols; ++c) d[c] += s[c];
    }
  });
}

void gated_product_forward(Stream, float* y, const float* x, std::int64_t rows, std::int64_t h) {
  parallel_for_rows(rows, h, [&](std::int64_t r) {
    const float* __restrict a = x + r * 2 * h;
    float* __restrict yr = y + r * h;
    for (std::int64_t c = 0; c < h; ++c) yr[c] = a[c] * a[h + c];
  });
}

void gated_product_backward(Stream, float* dx, const float* dy, const float* x, std::int64_t rows,
                            std::int64_t h) {
  parallel_for_rows(rows, h, [&](std::int64_t r) {
    const float* __restrict a = x + r * 2 * h;
    const float* __restrict g = dy + r * h;
    float* __restrict d = dx + r * 2 * h;
    for (std::int64_t c = 0; c < h; ++c) {
      d[c] = g[c] * a[h + c];
      d[h + c] = g[c] * a[c];
    }
  });
}

void activation_forward(Stream, Activation a, float* y, const float* x, std::int64_t n) {
  with_activation(a, [&](auto tag) {
    constexpr Activation A = decltype(tag)::value;
    parallel_for_chunks(n, [&](std::int64_t i0, std::int64_t i1) {
      with_vector_isa([&] {
        for (std::int64_t i = i0; i < i1; ++i) y[i] = act::forward(A, x[i]);
      });
    });
  });
}

void activation_backward(Stream, Activation a, float* dx, const float* dy, const float* x,
                         const float* y, std::int64_t n) {
  // x or y may be null when the activation's derivative does not read it.
  with_activation(a, [&](auto tag) {
    constexpr Activation A = decltype(tag)::value;
    parallel_for_chunks(n, [&](std::int64_t i0, std::int64_t i1) {
      with_vector_isa([&] {
        for (std::int64_t i = i0; i < i1; ++i) {
          const float xi = x != nullptr ? x[i] : 0.0f;
          const float yi = y != nullptr ? y[i] : 0.0f;
          dx[i] = dy[i] * act::derivative(A, xi, yi);
        }
      });
    });
  });
}

}  // namespace noeira::cpu
