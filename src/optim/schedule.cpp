#include "optim/schedule.hpp"

#include <cmath>
#include <numbers>

#include "kernels/error.hpp"

namespace noeira {

ScheduleKind parse_schedule_kind(std::string_view name) { return kScheduleNames.parse(name); }

std::string_view to_string(ScheduleKind kind) { return kScheduleNames.name_of(kind); }

void LrSchedule::validate() const {
  if (!(std::isfinite(base_lr) && base_lr >= 0.0f)) {
    throw InputError(detail::concat("lr schedule: base_lr = ", base_lr, " must be >= 0"));
  }
  if (warmup_steps < 0) {
    throw InputError(detail::concat("lr schedule: warmup_steps = ", warmup_steps,
                                    " must be >= 0"));
  }
  if (kind == ScheduleKind::WarmupCosine) {
    if (total_steps <= warmup_steps) {
      throw InputError(detail::concat("lr schedule: total_steps = ", total_steps,
                                      " must exceed warmup_steps = ", warmup_steps,
                                      " for warmup_cosine"));
    }
    if (!(min_lr >= 0.0f && min_lr <= base_lr)) {
      throw InputError(detail::concat("lr schedule: min_lr = ", min_lr, " must be in [0, ",
                                      base_lr, "]"));
    }
  }
}

float LrSchedule::lr_at(std::int64_t step) const {
  if (step < 0) throw InputError(detail::concat("lr schedule: negative step ", step));
  const double base = base_lr;
  if (kind == ScheduleKind::Constant) return base_lr;
  if (step < warmup_steps) {
    return static_cast<float>(base * static_cast<double>(step + 1) /
                              static_cast<double>(warmup_steps));
  }
  if (kind == ScheduleKind::Warmup) return base_lr;
  validate();
  if (step >= total_steps) return min_lr;
  const double p = static_cast<double>(step - warmup_steps) /
                   static_cast<double>(total_steps - warmup_steps);
  const double floor = min_lr;
  return static_cast<float>(floor + (base - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * p)));
}

}  // namespace noeira
