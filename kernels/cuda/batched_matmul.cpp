// Batched matrix products on CUDA: cuBLASLt strided batches (kernels/cuda/matmul.hpp), one per
// group, or one for all the groups when each group continues the previous one's stride.
//
// Row-major C[m,n] = op(A) · op(B) is, as cuBLAS sees it (column-major), Cᵀ[n,m] = op(B)ᵀ · op(A)ᵀ:
// the operands swap and so do their transposes.
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/error.hpp"

namespace noeira::cuda {

void batched_matmul(Stream s, const BatchedMatmulArgs& args) {
  if (args.m <= 0 || args.n <= 0 || args.batch <= 0 || args.groups <= 0) return;
  NOEIRA_CHECK(args.k > 0, "batched_matmul: empty inner dimension (k = ", args.k, ")");
  Gemm g;
  g.trans_a = args.trans_b;
  g.trans_b = args.trans_a;
  g.m = args.n;
  g.n = args.m;
  g.k = args.k;
  g.lda = args.ldb;
  g.ldb = args.lda;
  g.ldd = args.ldc;
  g.alpha = args.alpha;
  g.beta = args.beta;
  g.stride_a = args.stride_b;
  g.stride_b = args.stride_a;
  g.stride_d = args.stride_c;
  // Groups laid end to end at the items' stride are one longer batch: one launch.
  const bool folds = args.groups == 1 || (args.outer_stride_a == args.batch * args.stride_a &&
                                          args.outer_stride_b == args.batch * args.stride_b &&
                                          args.outer_stride_c == args.batch * args.stride_c);
  const std::int64_t launches = folds ? 1 : args.groups;
  g.batch = folds ? args.batch * args.groups : args.batch;
  for (std::int64_t group = 0; group < launches; ++group) {
    g.a = args.b + group * args.outer_stride_b;
    g.b = args.a + group * args.outer_stride_a;
    g.d = args.c + group * args.outer_stride_c;
    matmul(s, g);
  }
}

}  // namespace noeira::cuda
