// Losses on CUDA: one thread per row running the row math of kernels/loss_math.hpp, the same code
// the CPU runs, so per-row results match it up to the device's expf/logf rounding. That suits the
// class counts of classifiers (tens to thousands); a language-model vocabulary would want a block
// per row, which needs loss_math split into per-element pieces first.
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/scratch.hpp"
#include "kernels/loss_math.hpp"

namespace noeira::cuda {

namespace {

struct CrossEntropy {
  float* row_loss;
  float* dlogits;  // null: loss only
  const float* logits;
  const std::int32_t* labels;
  std::int64_t classes;
  float scale;
  __device__ void operator()(std::int64_t r) const {
    float* d = dlogits != nullptr ? dlogits + r * classes : nullptr;
    row_loss[r] = loss_math::cross_entropy_row(d, logits + r * classes, labels[r], classes, scale);
  }
};

struct SoftCrossEntropy {
  float* row_loss;
  float* dlogits;  // null: loss only
  const float* logits;
  const float* target;
  std::int64_t classes;
  float scale;
  __device__ void operator()(std::int64_t r) const {
    float* d = dlogits != nullptr ? dlogits + r * classes : nullptr;
    row_loss[r] = loss_math::soft_cross_entropy_row(d, logits + r * classes,
                                                    target + r * classes, classes, scale);
  }
};

struct Mse {
  float* row_loss;
  float* dpred;  // null: loss only
  const float* pred;
  const float* target;
  std::int64_t cols;
  float scale;
  __device__ void operator()(std::int64_t r) const {
    float* d = dpred != nullptr ? dpred + r * cols : nullptr;
    row_loss[r] = loss_math::mse_row(d, pred + r * cols, target + r * cols, cols, scale);
  }
};

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

void cross_entropy(Stream s, float* row_loss, float* dlogits, const float* logits,
                   const std::int32_t* labels, std::int64_t rows, std::int64_t classes,
                   float grad_scale) {
  if (classes <= 0) return;
  launch_map(s, rows, CrossEntropy{row_loss, dlogits, logits, labels, classes, grad_scale});
}

void soft_cross_entropy(Stream s, float* row_loss, float* dlogits, const float* logits,
                        const float* target_probs, std::int64_t rows, std::int64_t classes,
                        float grad_scale) {
  if (classes <= 0) return;
  launch_map(s, rows,
             SoftCrossEntropy{row_loss, dlogits, logits, target_probs, classes, grad_scale});
}

void mse(Stream s, float* row_loss, float* dpred, const float* pred, const float* target,
         std::int64_t rows, std::int64_t cols, float grad_scale) {
  if (cols <= 0) return;
  launch_map(s, rows, Mse{row_loss, dpred, pred, target, cols, grad_scale});
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
