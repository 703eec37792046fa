#include "kernels/cuda/matmul.hpp"

#include <cstdint>
#include <memory>

#include "kernels/cuda/check.hpp"
#include "kernels/cuda/handles.hpp"
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
Layout make_layout(std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t batch,
                   std::int64_t stride) {
  cublasLtMatrixLayout_t raw = nullptr;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, CUDA_R_32F, static_cast<std::uint64_t>(rows),
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

template <class T>
void set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

bool run(Stream stream, const Gemm& g, bool must_succeed) {
  NOEIRA_CHECK(g.k > 0, "GEMM with an empty inner dimension (k = ", g.k, ")");
  if (g.m <= 0 || g.n <= 0) return true;
  const LtContext lt = lt_context(stream);

  cublasLtMatmulDesc_t raw_desc = nullptr;
  const cublasComputeType_t compute =
      allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
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
  const Layout a = g.trans_a ? make_layout(g.k, g.m, g.lda, g.batch, g.stride_a)
                             : make_layout(g.m, g.k, g.lda, g.batch, g.stride_a);
  const Layout b = g.trans_b ? make_layout(g.n, g.k, g.ldb, g.batch, g.stride_b)
                             : make_layout(g.k, g.n, g.ldb, g.batch, g.stride_b);
  const Layout d = make_layout(g.m, g.n, g.ldd, g.batch, g.stride_d);

  cublasLtMatmulPreference_t raw_pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_pref));
  const Preference pref(raw_pref);
  const std::uint64_t workspace_bytes = lt.workspace_bytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
      sizeof(workspace_bytes)));

  // Unless told, the heuristic assumes 256-byte-aligned matrices; weights are views into the
  // policies' flat buffers and batches views of the data set, so tell it the pointers' alignment.
  // Every item of a batch must have it: the stride counts too (attention's heads sit head_dim
  // floats apart).
  auto set_alignment = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* p,
                           std::int64_t stride) {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    const auto step = g.batch > 1 ? static_cast<std::uintptr_t>(stride) * sizeof(float) : 0;
    std::uint32_t bytes = 256;
    while (bytes > 4 && (address % bytes != 0 || step % bytes != 0)) bytes /= 2;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw_pref, attr, &bytes, sizeof(bytes)));
  };
  set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, g.a, g.stride_a);
  set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, g.b, g.stride_b);
  set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, g.d, g.stride_d);
  set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, g.d, g.stride_d);

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
  NOEIRA_CHECK(found > 0, "cuBLASLt has no fp32 algorithm for a ", g.m, "x", g.n, "x", g.k,
               " GEMM with epilogue ", static_cast<int>(g.epilogue));

  const cublasStatus_t ran = cublasLtMatmul(lt.handle, raw_desc, &g.alpha, g.a, a.get(), g.b,
                                            b.get(), &g.beta, g.d, d.get(), g.d, d.get(),
                                            &heuristic.algo, lt.workspace, lt.workspace_bytes,
                                            as_cuda(stream));
  if (!must_succeed && ran == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  CUBLAS_CHECK(ran);
  return true;
}

}  // namespace

bool try_matmul(Stream stream, const Gemm& g) { return run(stream, g, false); }

void matmul(Stream stream, const Gemm& g) { run(stream, g, true); }

}  // namespace noeira::cuda
