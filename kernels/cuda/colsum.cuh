#pragma once
// Deterministic column sums out[c] (= or +=) Σ_r term(r, c), for bias and norm-scale gradients.
// Rows are cut into fixed chunks; each chunk is summed in row order by one thread per column,
// then the chunk sums are added in chunk order, all in double. No atomics: the result depends
// only on the data and the sizes, never on scheduling or the GPU. The CPU sums some of these
// columns in another order or precision (a Linear's bias gradient: floats in row order), so the
// two backends agree within fp32 rounding there, not to the bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/scratch.hpp"
#include "kernels/target.hpp"

namespace noeira::cuda {

namespace colsum_detail {

constexpr int kThreads = 256;
constexpr std::int64_t kChunkRows = 128;
constexpr std::int64_t kMaxChunks = 65535;  // gridDim.y limit

template <class Term>
__global__ void __launch_bounds__(kThreads)
    partial_kernel(double* partial, std::int64_t rows, std::int64_t cols, std::int64_t chunk_rows,
                   Term term) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * chunk_rows;
  const std::int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  double s = 0.0;
  for (std::int64_t r = r0; r < r1; ++r) s += static_cast<double>(term(r, c));
  partial[static_cast<std::int64_t>(blockIdx.y) * cols + c] = s;
}

inline __global__ void __launch_bounds__(kThreads)
    finish_kernel(GradMode mode, float* out, const double* partial, std::int64_t chunks,
                  std::int64_t cols) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  double s = 0.0;
  for (std::int64_t k = 0; k < chunks; ++k) s += partial[k * cols + c];
  const float total = static_cast<float>(s);
  out[c] = mode == GradMode::Overwrite ? total : out[c] + total;
}

}  // namespace colsum_detail

// term is a trivially copyable functor with __device__ float or double operator()(row, col).
template <class Term>
void column_sums(Stream stream, GradMode mode, float* out, std::int64_t rows, std::int64_t cols,
                 Term term) {
  using namespace colsum_detail;
  if (cols <= 0) return;
  const std::int64_t chunk_rows = std::max(kChunkRows, (rows + kMaxChunks - 1) / kMaxChunks);
  const std::int64_t chunks = rows > 0 ? (rows + chunk_rows - 1) / chunk_rows : 0;
  const unsigned col_blocks = static_cast<unsigned>((cols + kThreads - 1) / kThreads);
  Scratch<double> partial(stream, static_cast<std::size_t>(chunks * cols));
  if (chunks > 0) {
    const dim3 grid(col_blocks, static_cast<unsigned>(chunks));
    partial_kernel<<<grid, kThreads, 0, as_cuda(stream)>>>(partial.data(), rows, cols,
                                                            chunk_rows, term);
    check_launch();
  }
  finish_kernel<<<col_blocks, kThreads, 0, as_cuda(stream)>>>(mode, out, partial.data(), chunks,
                                                              cols);
  check_launch();
}

}  // namespace noeira::cuda
