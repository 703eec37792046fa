#include "kernels/cuda/matmul.hpp"

#include <cstdint>
#include <memory>
#include <optional>

#include "kernels/cuda/alignment_hint.hpp"
#include "kernels/cuda/bf16_operand.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/handles.hpp"
#include "kernels/cuda/scratch.hpp"
#include "kernels/cuda/settings.hpp"

namespace noeira::cuda {

namespace {

// Owners of the cuBLASLt descriptors, so that a throw between create and destroy leaks nothing.
struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* p) const { (void)cublasLtMatmulDescDestroy(p); }
  void operator()(cublasLtMatrixLayoutOpaque_t* p) const { (void)cublasLtMatrixLayoutDestroy(p); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const {
    (void)cublasLtMatmulPreferenceDestroy(p);
  }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DescDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DescDeleter>;

// A matrix layout; for a strided batch also its count and the offset between items.
Layout make_layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                   std::int64_t batch, std::int64_t stride) {
  cublasLtMatrixLayout_t raw = nullptr;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, type, static_cast<std::uint64_t>(rows),
                                          static_cast<std::uint64_t>(cols), ld));
  Layout layout(raw);
  if (batch > 1) {
    const auto count = static_cast<std::int32_t>(batch);
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                  sizeof(count)));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return layout;
}

// How a GEMM's operands A and B reach cuBLASLt: as they are (fp32); as bfloat16 copies (bf16);
// or, where cuBLASLt has no bf16 kernel for their leading dimensions and alignments, as fp32
// copies rounded to bfloat16 values, whose fp32 products are exact: the same products, added in
// fp32 all the same.
enum class OperandForm : std::uint8_t { Fp32, Bf16, RoundedFp32 };

// An operand as stored (column-major [rows, cols], leading dimension ld, `batch` items `stride`
// apart) in its form: a copy holds every element from the first the GEMM reads to the last
// (gaps between columns and items included, so that ld and stride stay as they are).
struct Operand {
  const void* data;
  cudaDataType_t type = CUDA_R_32F;
  std::size_t element_bytes = sizeof(float);
  std::optional<Scratch<std::uint16_t>> bf16;
  std::optional<ProductOperand<Precision::Bf16>> rounded;
  std::optional<Scratch<float>> widened;

  // values: fp32, or bfloat16 bits (dtype BF16) in the bf16 forms.
  Operand(Stream stream, OperandForm form, const void* values, DType dtype, std::int64_t rows,
          std::int64_t cols, std::int64_t ld, std::int64_t batch, std::int64_t stride)
      : data(values) {
    NOEIRA_CHECK(dtype == DType::F32 || (dtype == DType::BF16 && form != OperandForm::Fp32),
                 "an fp32 matrix product given a ", to_string(dtype), " operand");
    const std::int64_t span = (batch - 1) * stride + (cols - 1) * ld + rows;
    const auto* fp32 = static_cast<const float*>(values);
    if (form == OperandForm::Bf16) {
      type = CUDA_R_16BF;
      element_bytes = sizeof(std::uint16_t);
      if (dtype == DType::BF16) return;  // the bits as they are
      bf16.emplace(stream, static_cast<std::size_t>(span));
      to_bf16(stream, bf16->data(), fp32, span);
      data = bf16->data();
    } else if (form == OperandForm::RoundedFp32) {
      if (dtype == DType::BF16) {  // their values, exactly, in fp32
        widened.emplace(stream, static_cast<std::size_t>(span));
        from_bf16(stream, GradMode::Overwrite, widened->data(),
                  static_cast<const std::uint16_t*>(values), span);
        data = widened->data();
        return;
      }
      rounded.emplace(stream, fp32, span);
      data = rounded->get();
    }
  }
};

template <class T>
void set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

bool run_as(Stream stream, const Gemm& g, OperandForm form, bool must_succeed) {
  const LtContext lt = lt_context(stream);

  cublasLtMatmulDesc_t raw_desc = nullptr;
  // TF32 rounds fp32 inputs to 10 mantissa bits, which bfloat16 values already fit.
  const cublasComputeType_t compute = allow_tf32() && form != OperandForm::Bf16
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw_desc, compute, CUDA_R_32F));
  const MatmulDesc desc(raw_desc);
  set_attr(raw_desc, CUBLASLT_MATMUL_DESC_TRANSA,
           static_cast<std::int32_t>(g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N));
  set_attr(raw_desc, CUBLASLT_MATMUL_DESC_TRANSB,
           static_cast<std::int32_t>(g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N));
  set_attr(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<std::uint32_t>(g.epilogue));
  if (g.bias != nullptr) set_attr(raw_desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  if (g.aux != nullptr) {
    set_attr(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<void*>(g.aux));
    set_attr(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.aux_ld);
  }

  // Stored shapes: op(A) is [m,k], so A itself is [k,m] when transposed.
  NOEIRA_CHECK(g.batch == 1 || g.epilogue == CUBLASLT_EPILOGUE_DEFAULT,
               "a batched GEMM has no epilogue");
  const std::int64_t a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
  const std::int64_t b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
  const Operand a_op(stream, form, g.a, g.a_dtype, a_rows, a_cols, g.lda, g.batch, g.stride_a);
  const Operand b_op(stream, form, g.b, g.b_dtype, b_rows, b_cols, g.ldb, g.batch, g.stride_b);
  const Layout a = make_layout(a_op.type, a_rows, a_cols, g.lda, g.batch, g.stride_a);
  const Layout b = make_layout(b_op.type, b_rows, b_cols, g.ldb, g.batch, g.stride_b);
  const Layout d = make_layout(CUDA_R_32F, g.m, g.n, g.ldd, g.batch, g.stride_d);

  cublasLtMatmulPreference_t raw_pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
  const Preference pref(raw_pref);
  const std::uint64_t workspace_bytes = lt.workspace_bytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
      sizeof(workspace_bytes)));

  // Unless told, the heuristic assumes 256-byte-aligned matrices; weights are views into the
  // policies' flat buffers and batches views of the data set, so tell it the pointers' alignment
  // as far as the shapes fix it (alignment_hint.hpp: never more than 16 bytes, so that the same
  // shapes get the same algorithm and the same bits wherever the buffers lie). Every item of a
  // batch must have it: the stride counts too (attention's heads sit head_dim floats apart).
  // The heuristic is asked on every call, so no cached choice can disagree with the hint.
  auto set_alignment = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* p,
                           std::int64_t stride, std::size_t element_bytes) {
    const std::uint64_t stride_bytes =
        g.batch > 1 ? static_cast<std::uint64_t>(stride) * element_bytes : 0;
    const std::uint32_t bytes = alignment_hint(reinterpret_cast<std::uintptr_t>(p), stride_bytes,
                                               static_cast<std::uint32_t>(element_bytes));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, attr, &bytes, sizeof(bytes)));
  };
  set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, a_op.data, g.stride_a,
                a_op.element_bytes);
  set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, b_op.data, g.stride_b,
                b_op.element_bytes);
  set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, g.d, g.stride_d, sizeof(float));
  set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, g.d, g.stride_d, sizeof(float));

  // The heuristic sees the leading dimensions, the alignments and the epilogue's pointers, so it
  // also answers whether they allow the requested epilogue. In try mode any refusal
  // (NOT_SUPPORTED, no result, or INVALID_VALUE for an epilogue attribute it rejects) means "run
  // it unfused": a genuine error in the GEMM itself then surfaces from the caller's plain matmul.
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      lt.handle, raw_desc, a.get(), b.get(), d.get(), d.get(), raw_pref, 1, &heuristic, &found);
  if (!must_succeed && (status != CUBLAS_STATUS_SUCCESS || found == 0)) return false;
  CUBLAS_CHECK(status);
  NOEIRA_CHECK(found > 0, "cuBLASLt has no ", to_string(g.precision), " algorithm for a ", g.m,
               "x", g.n, "x", g.k, " GEMM with epilogue ", static_cast<int>(g.epilogue));

  const cublasStatus_t ran = cublasLtMatmul(lt.handle, raw_desc, &g.alpha, a_op.data, a.get(),
                                            b_op.data, b.get(), &g.beta, g.d, d.get(), g.d, d.get(),
                                            &heuristic.algo, lt.workspace, lt.workspace_bytes,
                                            as_cuda(stream));
  if (!must_succeed && ran == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  CUBLAS_CHECK(ran);
  return true;
}

bool run(Stream stream, const Gemm& g, bool must_succeed) {
  NOEIRA_CHECK(g.k > 0, "GEMM with an empty inner dimension (k = ", g.k, ")");
  if (g.m <= 0 || g.n <= 0) return true;
  if (g.precision == Precision::Fp32) return run_as(stream, g, OperandForm::Fp32, must_succeed);
  return run_as(stream, g, OperandForm::Bf16, false) ||
         run_as(stream, g, OperandForm::RoundedFp32, must_succeed);
}

}  // namespace

bool try_matmul(Stream stream, const Gemm& g) { return run(stream, g, false); }

void matmul(Stream stream, const Gemm& g) { run(stream, g, true); }

}  // namespace noeira::cuda
