#pragma once
// The one matrix product of the CPU kernels: C = alpha · op(A) · op(B) + beta · C, row-major,
// op(A) [m,k] (A stored [k,m] when trans_a), op(B) [k,n] (B stored [n,k] when trans_b), rows
// lda / ldb / ldc apart. beta = 0 never reads C.
//
// Both precisions through oneDNN's matmul (fp32 from fp32 operands; bf16 from A and B rounded
// to bfloat16, kernels/bf16_math.hpp, into this thread's conversion buffers; fp32 accumulation
// and result), each shape's primitive built once per thread and kept. Fp32 goes through
// OpenBLAS's sgemm instead in a build configured with -DNOEIRA_CPU_PRODUCTS=openblas: oneDNN
// is the default because it measured faster here (benchmarks/bench_sgemm.cpp; CMakeLists.txt).
// Callable from inside an OpenMP region (the product then runs on the calling thread), and from
// several threads at once (simulated ranks): every buffer and primitive is the calling thread's.
// The bits depend on the thread count a product runs on (so do OpenBLAS's), never on anything
// else.
#include <cstdint>

#include "kernels/target.hpp"

namespace noeira::cpu {

void gemm(Precision precision, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
          std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
          std::int64_t ldb, float beta, float* c, std::int64_t ldc);

// An operand given as fp32 values, or as the bfloat16 bits of values already rounded (an
// activation a leaf holds in bf16: kernels/kernel_table.hpp's typed Linear entries). Bits need a
// bf16 product, which then reads them as they are instead of rounding them again: the same
// product as of the fp32 values they were rounded from.
struct Operand {
  const void* data = nullptr;
  DType dtype = DType::F32;  // F32 or BF16
};
void gemm(Precision precision, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
          std::int64_t k, float alpha, Operand a, std::int64_t lda, Operand b, std::int64_t ldb,
          float beta, float* c, std::int64_t ldc);

// The library fp32 products run on: "oneDNN" or "OpenBLAS".
const char* products_library();

}  // namespace noeira::cpu
