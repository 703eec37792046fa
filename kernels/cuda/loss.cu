// Losses on CUDA: a block per row walking the row math of kernels/loss_math.hpp (the code the
// CPU runs) with BlockRow, whose block reductions combine in a fixed order: deterministic, and
// equal to the CPU up to the order of the float sums and the device's expf/logf rounding. A row
// of 10 classes leaves most of a warp idle, a row of 50k tokens keeps 512 threads busy.
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/scratch.hpp"
#include "kernels/loss_math.hpp"

namespace noeira::cuda {

namespace {

// loss_math's Row over one block: thread t owns columns t, t + blockDim.x, ... Every thread of
// the block must make the same calls (the reductions synchronize the block).
struct BlockRow {
  std::int64_t n;
  __host__ __device__ std::int64_t size() const { return n; }
  template <class F>
  __device__ float sum(F f) const {
    float s = 0.0f;
    for (std::int64_t c = threadIdx.x; c < n; c += blockDim.x) s += f(c);
    return block_sum(s);
  }
  template <class F>
  __device__ float max(F f) const {
    float m = -INFINITY;
    for (std::int64_t c = threadIdx.x; c < n; c += blockDim.x) m = fmaxf(m, f(c));
    return block_max(m);
  }
  template <class F>
  __device__ void each(F f) const {
    for (std::int64_t c = threadIdx.x; c < n; c += blockDim.x) f(c);
  }
  __device__ float exp(float d) const { return expf(d); }
};

__global__ void __launch_bounds__(kMaxRowThreads) row_loss_kernel(LossKind kind, RowLossArgs args) {
  const std::int64_t r = blockIdx.x;
  const float loss = loss_math::row_loss(BlockRow{args.cols}, kind, args, r);
  if (threadIdx.x == 0) args.row_loss[r] = loss;
}

struct CountCorrect {
  unsigned long long* correct;
  const float* logits;
  const std::int32_t* labels;
  std::int64_t classes;
  __device__ void operator()(std::int64_t r) const {
    // An integer sum: exact in any order, so the atomic keeps the count deterministic.
    if (loss_math::row_argmax(logits + r * classes, classes) == labels[r]) atomicAdd(correct, 1ull);
  }
};

}  // namespace

void row_loss(Stream s, LossKind kind, const RowLossArgs& args) {
  if (args.rows <= 0 || args.cols <= 0) return;
  row_loss_kernel<<<static_cast<unsigned>(args.rows), row_threads(args.cols), 0, as_cuda(s)>>>(
      kind, args);
  check_launch();
}

std::int64_t count_correct(Stream s, const float* logits, const std::int32_t* labels,
                           std::int64_t rows, std::int64_t classes) {
  if (rows <= 0 || classes <= 0) return 0;
  Scratch<unsigned long long> correct(s, 1);
  CUDA_CHECK(cudaMemsetAsync(correct.data(), 0, sizeof(unsigned long long), as_cuda(s)));
  launch_map(s, rows, CountCorrect{correct.data(), logits, labels, classes});
  unsigned long long host = 0;
  // download() waits for the stream: the count is needed on the host now.
  download(s, &host, correct.data(), sizeof(host));
  return static_cast<std::int64_t>(host);
}

}  // namespace noeira::cuda
