// The embedding gradient on CUDA (the lookup is gather_rows). Ids outside the vocabulary are
// skipped, as gather_rows poisons their forward rows.
//
// Backward without float atomics: one thread per column walks all rows in order and adds dy's row
// into the table row of its id. Each table element thus receives its contributions in row order,
// exactly as on the CPU (bit-identical, and the same for any launch shape), and threads never
// share an element. The price is parallelism limited to `dim` threads; a sort-by-id segmented sum
// would scale with rows too, at the cost of a sort per step.
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"

namespace noeira::cuda {

namespace {

// Small blocks: the grid is only dim threads wide, so spread it over more SMs.
constexpr int kScatterThreads = 64;

__global__ void __launch_bounds__(kScatterThreads)
    embedding_scatter_kernel(float* dtable, const float* dy, const std::int32_t* ids,
                             std::int64_t rows, std::int64_t dim, std::int64_t vocab) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t id = ids[r];
    if (id < 0 || id >= vocab) continue;  // poisoned in forward; never written outside the table
    dtable[id * dim + c] += dy[r * dim + c];
  }
}

}  // namespace

void embedding_backward(Stream s, GradMode mode, float* dtable, const float* dy,
                        const std::int32_t* ids, std::int64_t rows, std::int64_t dim,
                        std::int64_t vocab) {
  if (mode == GradMode::Overwrite) fill(s, dtable, 0.0f, vocab * dim);
  if (rows <= 0 || dim <= 0) return;
  const unsigned blocks = static_cast<unsigned>((dim + kScatterThreads - 1) / kScatterThreads);
  embedding_scatter_kernel<<<blocks, kScatterThreads, 0, as_cuda(s)>>>(dtable, dy, ids, rows, dim,
                                                                        vocab);
  check_launch();
}

}  // namespace noeira::cuda
