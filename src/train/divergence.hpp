#pragma once
// A run whose numbers went non-finite (NaN, ±inf) stops, rather than train on and save NaN
// parameters as if all were well. The checks sit where a value reaches the host anyway, so that
// a GPU step never waits for one: the loss sums on logged steps and at the end of a period, the
// gradient norm whenever it was computed (clipping, logged steps), and every value of a
// checkpoint before it is written (train/checkpointing.cpp).
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/error.hpp"
#include "train/config.hpp"

namespace noeira {

// Thrown by every rank alike (the values checked are global, or agreed on); not a failure to
// save, so the trainer writes no model.h5 for it.
class DivergedError : public Error {
 public:
  using Error::Error;
};

// "; no checkpoint written: step-00000020 stays latest" (or that there is none), for messages.
std::string kept_checkpoint_note(const TrainConfig& cfg);

// DivergedError unless `value` is finite (or --allow-non-finite lets the run go on):
// "step 37: non-finite <what> (nan)<context>; ...".
void check_finite(double value, std::int64_t step, std::string_view what,
                  std::string_view context, const TrainConfig& cfg);

}  // namespace noeira
