// The Linear family on the CPU: kernels/cpu/gemm.hpp for the products (at the table's
// precision), one fused pass for bias and activation (forward) and for the activation derivative
// and bias gradient (backward).

#include <cstdint>
#include <vector>

#include "kernels/activation_math.hpp"
#include "kernels/bf16_math.hpp"
#include "kernels/cpu/activation_dispatch.hpp"
#include "kernels/cpu/bf16_rounding.hpp"
#include "kernels/cpu/column_sum.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/vector_isa.hpp"
#include "kernels/error.hpp"

namespace noeira::cpu {

namespace {

// This thread's buffer for a gradient rounded to bfloat16 (kept, like the products' own
// conversion buffers, kernels/cpu/gemm.cpp).
std::uint16_t* rounded_gradient_buffer(std::int64_t n) {
  thread_local std::vector<std::uint16_t> buffer;
  if (buffer.size() < static_cast<std::size_t>(n)) buffer.resize(static_cast<std::size_t>(n));
  return buffer.data();
}

}  // namespace

template <Precision P>
void linear_forward_typed_at(Stream, Activation a, void* y_out, DType y_dtype, float* pre,
                             const void* x, DType x_dtype, const float* w, const float* b,
                             std::int64_t rows, std::int64_t in, std::int64_t out) {
  const bool y_bits = y_dtype == DType::BF16;
  NOEIRA_CHECK(!y_bits || (activation_needs_input(a) && pre != nullptr),
               "linear_forward: a bfloat16 output needs the pre-activation of an activation "
               "whose derivative reads it, not ", to_string(a));
  // y = x · wᵀ; for a bf16 output into pre, whose epilogue then writes y once, rounded.
  float* y = y_bits ? pre : static_cast<float*>(y_out);
  gemm(P, false, true, rows, out, in, 1.0f, Operand{x, x_dtype}, in, Operand{w}, in, 0.0f, y, out);
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
          if (y_bits) {
            std::uint16_t* __restrict br = static_cast<std::uint16_t*>(y_out) + r * out;
            for (std::int64_t c = 0; c < out; ++c) br[c] = bf16_bits(act::forward(A, yr[c]));
            return;
          }
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

template <Precision P>
void linear_backward_typed_at(Stream, Activation a, GradMode mode, float* dx, float* dw,
                              float* db, float* dpre, const float* dy, const void* x,
                              DType x_dtype, const float* w, const float* y, const float* pre,
                              std::int64_t rows, std::int64_t in, std::int64_t out) {
  // dpre = dy ⊙ act'(pre, y); for Identity dy itself is the pre-activation gradient.
  NOEIRA_CHECK(pre != nullptr || !activation_needs_input(a),
               "linear_backward: activation ", to_string(a), " needs the forward's pre-activation");
  // Under bf16 both products read g rounded to bfloat16: rounded once here (in the derivative's
  // pass when there is one), not once by each product. The same bits into the same products, one
  // pass over g fewer: at gpt-small's shapes the products' rounding was a sixth of a bf16 step.
  std::uint16_t* g16 = nullptr;
  if constexpr (P == Precision::Bf16) {
    if (dx != nullptr) g16 = rounded_gradient_buffer(rows * out);
  }
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
        if (g16 != nullptr) round_to_bf16_bits(g16 + r * out, dpre + r * out, out);
      });
    });
    g = dpre;
  } else if (g16 != nullptr) {
    parallel_for_rows(rows, out, [&](std::int64_t r) {
      round_to_bf16_bits(g16 + r * out, dy + r * out, out);
    });
  }
  const Operand g_operand = g16 != nullptr ? Operand{g16, DType::BF16} : Operand{g};
  const float beta = mode == GradMode::Accumulate ? 1.0f : 0.0f;
  // Parameter gradients first. dw[out,in] (+)= gᵀ · x
  gemm(P, true, false, out, in, rows, 1.0f, g_operand, out, Operand{x, x_dtype}, in, beta, dw,
       in);
  if (db != nullptr) {
    // Column sums in row order (blocks of columns over the threads): a fixed order, so the result
    // is the same for any thread count.
    parallel_for_column_blocks(rows, out, [&](std::int64_t c0, std::int64_t c1) {
      with_vector_isa([&] {
        float* __restrict d = db;
        if (mode == GradMode::Overwrite) {
          for (std::int64_t c = c0; c < c1; ++c) d[c] = 0.0f;
        }
        for (std::int64_t r = 0; r < rows; ++r) {
          const float* __restrict gr = g + r * out;
          for (std::int64_t c = c0; c < c1; ++c) d[c] += gr[c];
        }
      });
    });
  }
  // Then the input gradient: dx[rows,in] = g · w
  if (dx != nullptr) {
    gemm(P, false, false, rows, in, out, 1.0f, g_operand, out, Operand{w}, in, 0.0f, dx, in);
  }
}

NOEIRA_PRODUCT_KERNEL_AT_BOTH_PRECISIONS(linear_forward_typed_at);
NOEIRA_PRODUCT_KERNEL_AT_BOTH_PRECISIONS(linear_backward_typed_at);

}  // namespace noeira::cpu
