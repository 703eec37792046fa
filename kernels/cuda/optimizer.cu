// Optimizer steps on CUDA: one fused element-wise kernel per optimizer over a flat buffer (a whole
// parameter or a shard of one), the per-element math from kernels/optimizer_math.hpp.
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/optimizer_math.hpp"

namespace noeira::cuda {

namespace {

struct SgdStep {
  float* w;
  float* momentum;  // null when hyper.momentum == 0
  const float* g;
  SgdHyper hyper;
  __device__ void operator()(std::int64_t i) const {
    sgd_update(w[i], momentum != nullptr ? momentum + i : nullptr, g[i], hyper);
  }
};

struct AdamStep {
  float* w;
  float* m;
  float* v;
  const float* g;
  AdamCoefficients c;
  __device__ void operator()(std::int64_t i) const { adam_update(w[i], m[i], v[i], g[i], c); }
};

}  // namespace

void sgd_step(Stream s, float* w, float* momentum, const float* g, std::int64_t n,
              SgdHyper hyper) {
  launch_map(s, n, SgdStep{w, momentum, g, hyper});
}

void adam_step(Stream s, float* w, float* m, float* v, const float* g, std::int64_t n,
               AdamHyper hyper) {
  launch_map(s, n, AdamStep{w, m, v, g, adam_coefficients(hyper)});
}

}  // namespace noeira::cuda
