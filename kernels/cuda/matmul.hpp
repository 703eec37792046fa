#pragma once
// One fp32 GEMM, or a strided batch of them, through cuBLASLt, column-major as cuBLAS sees it:
//   D[m,n] = alpha · op(A)[m,k] · op(B)[k,n] + beta · D,  then the epilogue;
// item i of a batch reads a + i·stride_a, b + i·stride_b and writes d + i·stride_d.
// Row-major callers swap operands (a row-major [r,c] matrix is a column-major [c,r] one).
// Compute type CUBLAS_COMPUTE_32F unless set_allow_tf32(true) (kernels/cuda/settings.hpp).
// At Precision::Bf16 the operands A and B are rounded to bfloat16 first (into stream-ordered
// scratch, as the CPU rounds them: kernels/bf16_math.hpp) and multiplied by cuBLASLt's bf16
// kernels, accumulating in fp32 into the fp32 D (CUBLAS_COMPUTE_32F; TF32 does not apply): the
// products of the CPU's bf16 table (--precision bf16). Where cuBLASLt has no bf16 kernel for the
// operands' leading dimensions or alignment, they are rounded to bfloat16 values held in fp32
// and go through the fp32 kernels: exact products of the same values, added in fp32.
#include <cublasLt.h>

#include <cstdint>

#include "kernels/target.hpp"

namespace noeira::cuda {

struct Gemm {
  bool trans_a = false;
  bool trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;  // k > 0
  // A and B are fp32 values, or at Precision::Bf16 either may be the bfloat16 bits of values
  // already rounded (an activation held in bf16: kernels/kernel_table.hpp's typed Linear entries),
  // which are then read as they are: the product of the fp32 values they were rounded from.
  const void* a = nullptr;
  DType a_dtype = DType::F32;
  std::int64_t lda = 0;
  const void* b = nullptr;
  DType b_dtype = DType::F32;
  std::int64_t ldb = 0;
  float* d = nullptr;  // also C (beta · D is added in place)
  std::int64_t ldd = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  std::int64_t batch = 1;  // strided batch of this many products (no epilogue with batch > 1)
  std::int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const float* bias = nullptr;  // [m], for the *BIAS epilogues
  float* aux = nullptr;         // [m, n] with leading dimension aux_ld, for the *_AUX epilogues
  std::int64_t aux_ld = 0;
  Precision precision = Precision::Fp32;  // of A and B
};

// Runs the GEMM. Returns false, having launched nothing, when cuBLASLt offers no algorithm for
// this epilogue with these pointers and leading dimensions (bias or aux alignment, aux_ld not a
// multiple of 8), so that the caller can run the epilogue unfused instead. Other failures throw.
bool try_matmul(Stream stream, const Gemm& g);

// As try_matmul, but having no algorithm is an error too.
void matmul(Stream stream, const Gemm& g);

}  // namespace noeira::cuda
