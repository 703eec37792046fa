#include "train/step.hpp"

#include <vector>

namespace noeira {

namespace {
constexpr std::int64_t kStep = 0, kPeriod = 1, kWindow = 2;
}  // namespace

LossSums::LossSums(Target target, double period, double window)
    : sums_(Tensor::from_host_as<double>({3}, std::vector<double>{0.0, period, window}, target)) {}

double* LossSums::begin_step(Context& ctx) {
  double* step = sums_.as<double>() + kStep;
  // All-zero bits are 0.0: one double is two zero floats.
  ctx.k->fill(ctx.stream, reinterpret_cast<float*>(step), 0.0f, 2);
  return step;
}

void LossSums::end_step(Context& ctx) {
  double* s = sums_.as<double>();
  ctx.k->accumulate_typed(ctx.stream, DType::F64, s + kPeriod, s + kStep, 1);
  ctx.k->accumulate_typed(ctx.stream, DType::F64, s + kWindow, s + kStep, 1);
}

double LossSums::period() const { return sums_.to_host<double>()[kPeriod]; }

double LossSums::window() const { return sums_.to_host<double>()[kWindow]; }

void LossSums::reset_period_and_window() { sums_.zero(); }

void LossSums::reset_window() {
  // On the target's default stream, which is ordered after every rank stream's work.
  kernels_for(sums_.target()).fill(nullptr, reinterpret_cast<float*>(sums_.as<double>() + kWindow),
                                   0.0f, 2);
}

}  // namespace noeira
