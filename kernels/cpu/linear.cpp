// The Linear family on the CPU: OpenBLAS sgemm for the products, one fused pass for bias and
// activation (forward) and for the activation derivative and bias gradient (backward).
#include <cblas.h>

#include "kernels/activation_math.hpp"
#include "kernels/cpu/activation_dispatch.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/vector_isa.hpp"
#include "kernels/error.hpp"

namespace noeira::cpu {

namespace {
int as_blas_int(std::int64_t v) { return static_cast<int>(v); }
}  // namespace

void linear_forward(Stream, Activation a, float* y, float* pre, const float* x, const float* w,
                    const float* b, std::int64_t rows, std::int64_t in, std::int64_t out) {
  // y = x · wᵀ
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, as_blas_int(rows), as_blas_int(out),
              as_blas_int(in), 1.0f, x, as_blas_int(in), w, as_blas_int(in), 0.0f, y,
              as_blas_int(out));
  // Epilogue while the rows are still in cache: + bias, keep pre-activation if needed, activate.
  if (b == nullptr && a == Activation::Identity) return;
  with_activation(a, [&](auto tag) {
    constexpr Activation A = decltype(tag)::value;
    parallel_for_rows(rows, out, [&](std::int64_t r) {
      with_vector_isa([&] {
        float* __restrict yr = y + r * out;
        if (b != nullptr) {
          for (std::int64_t c = 0; c < out; ++c) yr[c] += b[c];
        }
        if constexpr (activation_needs_input(A)) {
          if (pre != nullptr) {
            float* __restrict pr = pre + r * out;
            for (std::int64_t c = 0; c < out; ++c) pr[c] = yr[c];
          }
        }
        if constexpr (A != Activation::Identity) {
          for (std::int64_t c = 0; c < out; ++c) yr[c] = act::forward(A, yr[c]);
        }
      });
    });
  });
}

void linear_backward(Stream, Activation a, GradMode mode, float* dx, float* dw, float* db,
                     float* dpre, const float* dy, const float* x, const float* w, const float* y,
                     const float* pre, std::int64_t rows, std::int64_t in, std::int64_t out) {
  // dpre = dy ⊙ act'(pre, y); for Identity dy itself is the pre-activation gradient.
  NOEIRA_CHECK(pre != nullptr || !activation_needs_input(a),
               "linear_backward: activation ", to_string(a), " needs the forward's pre-activation");
  const float* g = dy;
  if (a != Activation::Identity) {
    with_activation(a, [&](auto tag) {
      constexpr Activation A = decltype(tag)::value;
      parallel_for_rows(rows, out, [&](std::int64_t r) {
        with_vector_isa([&] {
          const std::int64_t o = r * out;
          float* __restrict dp = dpre + o;
          const float* __restrict dyr = dy + o;
          const float* __restrict yr = y + o;
          const float* __restrict pr = activation_needs_input(A) ? pre + o : nullptr;
          for (std::int64_t c = 0; c < out; ++c) {
            const float z = activation_needs_input(A) ? pr[c] : 0.0f;
            dp[c] = dyr[c] * act::derivative(A, z, yr[c]);
          }
        });
      });
    });
    g = dpre;
  }
  const float beta = mode == GradMode::Accumulate ? 1.0f : 0.0f;
  // Parameter gradients first. dw[out,in] (+)= gᵀ · x
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, as_blas_int(out), as_blas_int(in),
              as_blas_int(rows), 1.0f, g, as_blas_int(out), x, as_blas_int(in), beta, dw,
              as_blas_int(in));
  if (db != nullptr) {
    // Column sums in row order: a fixed order, so the result is the same for any thread count.
    with_vector_isa([&] {
      if (mode == GradMode::Overwrite) {
        for (std::int64_t c = 0; c < out; ++c) db[c] = 0.0f;
      }
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* __restrict gr = g + r * out;
        float* __restrict d = db;
        for (std::int64_t c = 0; c < out; ++c) d[c] += gr[c];
      }
    });
  }
  // Then the input gradient: dx[rows,in] = g · w
  if (dx != nullptr) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_blas_int(rows), as_blas_int(in),
                as_blas_int(out), 1.0f, g, as_blas_int(out), w, as_blas_int(in), 0.0f, dx,
                as_blas_int(in));
  }
}

}  // namespace noeira::cpu
