#pragma once
// The one matrix product of the CPU kernels: C = alpha · op(A) · op(B) + beta · C, row-major,
// op(A) [m,k] (A stored [k,m] when trans_a), op(B) [k,n] (B stored [n,k] when trans_b), rows
// lda / ldb / ldc apart. beta = 0 never reads C.
//
// Fp32: OpenBLAS's sgemm. Bf16: A and B rounded to bfloat16 (kernels/bf16_math.hpp) into this
// thread's conversion buffers, then oneDNN's matmul (its bf16 kernels, fp32 accumulation and
// result); the primitive of each shape is built once per thread and kept. Callable from inside
// an OpenMP region (the product then runs on the calling thread), and from several threads at
// once (simulated ranks): every buffer and primitive is the calling thread's.
#include <cstdint>

#include "kernels/target.hpp"

namespace noeira::cpu {

void gemm(Precision precision, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
          std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
          std::int64_t ldb, float beta, float* c, std::int64_t ldc);

}  // namespace noeira::cpu
