// The Linear family on CUDA: cuBLASLt GEMMs with bias and activation fused into the epilogue
// where cuBLASLt has one, the shared element-wise math where it has not.
//
// Row-major y[rows,out] = x[rows,in] · w[out,in]ᵀ is, as cuBLAS sees it (column-major),
// yᵀ[out,rows] = w_cm[in,out]ᵀ · xᵀ[in,rows]: A = w transposed, B = x, m = out, n = rows, k = in.
// The bias has one entry per row of that D, which is what the BIAS epilogues broadcast.
#include <cstdint>

#include "kernels/activation_math.hpp"
#include "kernels/cuda/colsum.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/scratch.hpp"

namespace noeira::cuda {

namespace {

// The epilogue run unfused when cuBLASLt cannot take it: the CPU's fused pass, element-wise.
struct BiasAct {
  Activation act;
  float* y;
  float* pre;  // null unless the pre-activation is kept
  const float* b;
  std::int64_t out;
  __device__ void operator()(std::int64_t i) const {
    const float z = b != nullptr ? y[i] + b[i % out] : y[i];
    if (pre != nullptr) pre[i] = z;
    y[i] = act::forward(act, z);
  }
};

struct BiasGrad {
  const float* g;
  std::int64_t out;
  __device__ float operator()(std::int64_t r, std::int64_t c) const { return g[r * out + c]; }
};

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

template <Precision P>
void linear_forward_typed_at(Stream s, Activation a, void* y_out, DType y_dtype, float* pre,
                             const void* x, DType x_dtype, const float* w, const float* b,
                             std::int64_t rows, std::int64_t in, std::int64_t out) {
  NOEIRA_CHECK(y_dtype == DType::F32 || (activation_needs_input(a) && pre != nullptr),
               "linear_forward: a bfloat16 output needs the pre-activation of an activation "
               "whose derivative reads it, not ", to_string(a));
  if (rows <= 0 || out <= 0) return;
  if (y_dtype == DType::BF16) {
    // The fp32 path's numbers (cuBLASLt's GELU epilogue where it fuses, which writes fp32) into
    // stream-ordered scratch for the call's length, rounded: the same bits as y in fp32, rounded.
    Scratch<float> y32(s, static_cast<std::size_t>(rows * out));
    linear_forward_typed_at<P>(s, a, y32.data(), DType::F32, pre, x, x_dtype, w, b, rows, in,
                               out);
    to_bf16(s, static_cast<std::uint16_t*>(y_out), y32.data(), rows * out);
    return;
  }
  float* y = static_cast<float*>(y_out);
  const bool keep_pre = activation_needs_input(a) && pre != nullptr;
  const bool has_bias = b != nullptr;

  Gemm g;
  g.trans_a = true;
  g.m = out;
  g.n = rows;
  g.k = in;
  g.a = w;
  g.lda = in;
  g.b = x;
  g.b_dtype = x_dtype;
  g.ldb = in;
  g.ldd = out;
  g.precision = P;
  g.d = y;
  g.bias = b;

  // Which part of the activation runs after the GEMM, from `post_input` into y.
  bool post_activation = false;
  const float* post_input = y;
  // The bias (and aux) must be 16-byte aligned for the fused epilogues; cuBLASLt's heuristic
  // also says no for anything else it cannot do, and then the unfused path below runs.
  bool fusable = !has_bias || aligned16(b);
  switch (a) {
    case Activation::Identity:
      g.epilogue = has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
      break;
    case Activation::ReLU:
      g.epilogue = has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
      break;
    case Activation::GeluTanh:
      // cuBLASLt's GELU is the tanh approximation. Its aux output is the GELU input (x·wᵀ+b),
      // i.e. exactly `pre`, stored like D ([out, rows], leading dimension out); cuBLASLt needs
      // that leading dimension to be a multiple of 8.
      if (keep_pre) {
        g.epilogue = has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
        g.aux = pre;
        g.aux_ld = out;
        fusable = fusable && out % 8 == 0 && aligned16(pre);
      } else {
        g.epilogue = has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
      }
      break;
    case Activation::Tanh:
    case Activation::Sigmoid:
    case Activation::GeluErf:
    case Activation::SiLU:
    case Activation::Elu:
    case Activation::HardSwish:
    case Activation::Mish:
    case Activation::Softplus:
      // No cuBLASLt epilogue: GEMM + bias into pre (or straight into y), then the element-wise
      // activation from the shared math.
      g.epilogue = has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
      if (keep_pre) g.d = pre;
      post_activation = true;
      post_input = g.d;
      break;
  }
  if (fusable && try_matmul(s, g)) {
    if (post_activation) activation_forward(s, a, y, post_input, rows * out);
    return;
  }
  // Unfused: plain GEMM into y, then bias, pre and activation in one element-wise pass.
  g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  g.bias = nullptr;
  g.aux = nullptr;
  g.aux_ld = 0;
  g.d = y;
  matmul(s, g);
  launch_map(s, rows * out, BiasAct{a, y, keep_pre ? pre : nullptr, b, out});
}

// The backward epilogues (DRELU_BGRAD, DGELU_BGRAD) are not used: they fuse the activation
// derivative into the GEMM that *produces* dy (the next layer's dx GEMM), which lies outside this
// call, and DRELU needs a ReLU bit-mask aux that the table does not carry. So dpre = dy · act'
// is one element-wise pass (ReLU's derivative from y, GELU's from pre, as on the CPU), and the
// bias gradient is a deterministic column sum rather than BGRADB, which overwrites and so
// cannot honour GradMode::Accumulate.
template <Precision P>
void linear_backward_typed_at(Stream s, Activation a, GradMode mode, float* dx, float* dw,
                              float* db, float* dpre, const float* dy, const void* x,
                              DType x_dtype, const float* w, const float* y, const float* pre,
                              std::int64_t rows, std::int64_t in, std::int64_t out) {
  NOEIRA_CHECK(pre != nullptr || !activation_needs_input(a),
               "linear_backward: the derivative of ", to_string(a), " needs the pre-activation");
  if (rows <= 0) {
    // No rows: the gradients are zero sums.
    if (mode == GradMode::Overwrite) {
      fill(s, dw, 0.0f, out * in);
      if (db != nullptr) fill(s, db, 0.0f, out);
    }
    return;
  }
  const float* g = dy;
  if (a != Activation::Identity) {
    activation_backward(s, a, dpre, dy, pre, y, rows * out);
    g = dpre;
  }

  // Parameter gradients first. dw[out,in] (+)= gᵀ · x, i.e. column-major
  // dw_cm[in,out] = x_cm[in,rows] · g_cm[out,rows]ᵀ.
  Gemm gw;
  gw.trans_b = true;
  gw.m = in;
  gw.n = out;
  gw.k = rows;
  gw.a = x;
  gw.a_dtype = x_dtype;
  gw.lda = in;
  gw.b = g;
  gw.ldb = out;
  gw.d = dw;
  gw.ldd = in;
  gw.beta = mode == GradMode::Accumulate ? 1.0f : 0.0f;
  gw.precision = P;
  matmul(s, gw);
  if (db != nullptr) column_sums(s, mode, db, rows, out, BiasGrad{g, out});

  // Then the input gradient: dx[rows,in] = g · w, i.e. dx_cm[in,rows] = w_cm[in,out] · g_cm.
  if (dx != nullptr && out == 0) fill(s, dx, 0.0f, rows * in);
  if (dx != nullptr && out > 0) {
    Gemm gx;
    gx.m = in;
    gx.n = rows;
    gx.k = out;
    gx.a = w;
    gx.lda = in;
    gx.b = g;
    gx.ldb = out;
    gx.d = dx;
    gx.ldd = in;
    gx.precision = P;
    matmul(s, gx);
  }
}

NOEIRA_PRODUCT_KERNEL_AT_BOTH_PRECISIONS(linear_forward_typed_at);
NOEIRA_PRODUCT_KERNEL_AT_BOTH_PRECISIONS(linear_backward_typed_at);

}  // namespace noeira::cuda
