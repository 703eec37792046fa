// The pointwise part of a recurrent time step on CUDA: kernels/recurrent_math.hpp's math (shared
// with the CPU), one thread per (sequence, unit), so a step is one launch between its GEMMs.
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"
#include "kernels/recurrent_math.hpp"

namespace noeira::cuda {

namespace {

template <bool Backward>
struct StepUnit {
  RecurrentStep step;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t b = i / step.hidden;
    const std::int64_t j = i - b * step.hidden;
    if constexpr (Backward) {
      recurrent_math::step_backward(step, b, j);
    } else {
      recurrent_math::step_forward(step, b, j);
    }
  }
};

}  // namespace

void recurrent_step_forward(Stream s, const RecurrentStep& step) {
  launch_map(s, step.batch * step.hidden, StepUnit<false>{step});
}

void recurrent_step_backward(Stream s, const RecurrentStep& step) {
  launch_map(s, step.batch * step.hidden, StepUnit<true>{step});
}

}  // namespace noeira::cuda
