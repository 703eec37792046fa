// Batched matrix products on CUDA: cuBLASLt strided batches (kernels/cuda/matmul.hpp), one per
// group, or one for all the groups when each group continues the previous one's stride.
//
// Row-major C[m,n] = op(A) · op(B) is, as cuBLAS sees it (column-major), Cᵀ[n,m] = op(B)ᵀ · op(A)ᵀ:
// the operands swap and so do their transposes.
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/error.hpp"

namespace noeira::cuda {

template <Precision P>
void batched_matmul_at(Stream s, const BatchedMatmulArgs& args) {
  if (args.m <= 0 || args.n <= 0 || args.batch <= 0 || args.groups <= 0) return;
  NOEIRA_CHECK(args.k > 0, "batched_matmul: empty inner dimension (k = ", args.k, ")");
  // Groups laid end to end at the items' stride are one longer batch: one launch.
  auto continues = [&](const auto& x) { return x.outer_stride == args.batch * x.stride; };
  const bool folds =
      args.groups == 1 || (continues(args.a) && continues(args.b) && continues(args.c));
  Gemm g;
  g.trans_a = args.trans_b;
  g.trans_b = args.trans_a;
  g.m = args.n;
  g.n = args.m;
  g.k = args.k;
  g.alpha = args.alpha;
  g.beta = args.beta;
  g.batch = folds ? args.batch * args.groups : args.batch;
  g.precision = P;
  for (std::int64_t group = 0; group < (folds ? 1 : args.groups); ++group) {
    // Column-major A is row-major B and the other way round.
    g.a = args.b.data + group * args.b.outer_stride;
    g.lda = args.b.ld;
    g.stride_a = args.b.stride;
    g.b = args.a.data + group * args.a.outer_stride;
    g.ldb = args.a.ld;
    g.stride_b = args.a.stride;
    g.d = args.c.data + group * args.c.outer_stride;
    g.ldd = args.c.ld;
    g.stride_d = args.c.stride;
    matmul(s, g);
  }
}

NOEIRA_PRODUCT_KERNEL_AT_BOTH_PRECISIONS(batched_matmul_at);

}  // namespace noeira::cuda
