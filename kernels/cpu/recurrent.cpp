// The pointwise part of a recurrent time step on the CPU: kernels/recurrent_math.hpp's math, one
// sequence per iteration. The units are independent, so the thread count changes nothing.
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/recurrent_math.hpp"

namespace noeira::cpu {

void recurrent_step_forward(Stream, const RecurrentStep& step) {
  parallel_for_rows(step.batch, step.hidden, [&](std::int64_t b) {
    for (std::int64_t j = 0; j < step.hidden; ++j) recurrent_math::step_forward(step, b, j);
  });
}

void recurrent_step_backward(Stream, const RecurrentStep& step) {
  parallel_for_rows(step.batch, step.hidden, [&](std::int64_t b) {
    for (std::int64_t j = 0; j < step.hidden; ++j) recurrent_math::step_backward(step, b, j);
  });
}

}  // namespace noeira::cpu
