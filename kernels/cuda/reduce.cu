// Deterministic sums: a fixed partition of x into chunks (one block each, independent of the
// GPU), each chunk reduced in double by a fixed tree, then the chunk sums added in chunk order:
// on the host for sum and sum_squares, by one device thread for sum_into (no download, so no
// wait). The result depends only on the data and n — the same on any GPU of any size, which
// bit-exact resume and simulated ranks rely on. It is not bit-identical to the CPU (whose
// in-chunk order is sequential), only equal within double rounding.
#include <vector>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/scratch.hpp"

namespace noeira::cuda {

namespace {

constexpr int kReduceThreads = 256;
constexpr std::int64_t kChunk = 8192;  // elements per block, 32 per thread

struct Value {
  __device__ double operator()(float x) const { return static_cast<double>(x); }
};

struct Square {
  __device__ double operator()(float x) const {
    const double v = x;
    return v * v;
  }
};

template <class Term>
__global__ void __launch_bounds__(kReduceThreads)
    chunk_sums_kernel(double* partial, const float* x, std::int64_t n, Term term) {
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x) * kChunk;
  const std::int64_t end = begin + kChunk < n ? begin + kChunk : n;
  double s = 0.0;
  // Strided by the block so that a warp's loads are coalesced.
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) s += term(x[i]);
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// The device half of both ways to finish: the chunk sums of x (n > 0) in a scratch buffer.
template <class Term>
class ChunkSums {
 public:
  ChunkSums(Stream stream, const float* x, std::int64_t n, Term term)
      : chunks_((n + kChunk - 1) / kChunk), partial_(stream, static_cast<std::size_t>(chunks_)) {
    chunk_sums_kernel<<<static_cast<unsigned>(chunks_), kReduceThreads, 0, as_cuda(stream)>>>(
        partial_.data(), x, n, term);
    check_launch();
  }
  std::int64_t chunks() const { return chunks_; }
  double* data() { return partial_.data(); }

 private:
  std::int64_t chunks_;
  Scratch<double> partial_;
};

template <class Term>
double chunked_sum(Stream stream, const float* x, std::int64_t n, Term term) {
  if (n <= 0) return 0.0;
  ChunkSums<Term> partial(stream, x, n, term);
  std::vector<double> host(static_cast<std::size_t>(partial.chunks()));
  // download() waits for the stream: the result is needed on the host now.
  download(stream, host.data(), partial.data(), host.size() * sizeof(double));
  double total = 0.0;
  for (double p : host) total += p;
  return total;
}

// chunked_sum's host loop on the device: the same total, added in the same order.
__global__ void __launch_bounds__(1)
    add_chunks_kernel(double* acc, const double* partial, std::int64_t chunks) {
  double total = 0.0;
  for (std::int64_t c = 0; c < chunks; ++c) total += partial[c];
  *acc += total;
}

}  // namespace

double sum_squares(Stream s, const float* x, std::int64_t n) {
  return chunked_sum(s, x, n, Square{});
}

double sum(Stream s, const float* x, std::int64_t n) { return chunked_sum(s, x, n, Value{}); }

void sum_into(Stream s, double* acc, const float* x, std::int64_t n) {
  if (n <= 0) return;
  ChunkSums<Value> partial(s, x, n, Value{});
  add_chunks_kernel<<<1, 1, 0, as_cuda(s)>>>(acc, partial.data(), partial.chunks());
  check_launch();
}

}  // namespace noeira::cuda
