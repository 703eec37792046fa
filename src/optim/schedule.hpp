#pragma once
// Learning-rate schedules, as a pure function of the step (so a resumed run needs only the step).
#include <cstdint>
#include <string_view>

#include "core/names.hpp"

namespace noeira {

enum class ScheduleKind : std::uint8_t {
  Constant,      // base_lr throughout
  Warmup,        // linear warmup, then base_lr
  WarmupCosine,  // linear warmup, then cosine decay to min_lr at total_steps, min_lr after
};

inline constexpr NameTable<ScheduleKind, 3> kScheduleNames{
    {{{ScheduleKind::Constant, "constant"},
      {ScheduleKind::Warmup, "warmup"},
      {ScheduleKind::WarmupCosine, "warmup_cosine"}}},
    "learning-rate schedule"};

// "constant", "warmup", "warmup_cosine"; anything else is an InputError listing them.
ScheduleKind parse_schedule_kind(std::string_view name);
std::string_view to_string(ScheduleKind kind);

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::Constant;
  float base_lr = 1e-3f;
  std::int64_t warmup_steps = 0;  // steps 0 .. warmup_steps-1 ramp up (Warmup, WarmupCosine)
  std::int64_t total_steps = 0;   // WarmupCosine reaches min_lr here
  float min_lr = 0.0f;            // WarmupCosine's floor

  // The learning rate of (0-based) step `step`:
  //  - warmup, step < warmup_steps: base_lr · (step + 1) / warmup_steps;
  //  - cosine, warmup_steps <= step <= total_steps, p = (step - warmup) / (total - warmup):
  //    min_lr + (base_lr - min_lr) · (1 + cos(π p)) / 2; min_lr after total_steps.
  float lr_at(std::int64_t step) const;

  // Throws InputError for a schedule lr_at cannot follow (negative steps, total_steps not past
  // the warmup for WarmupCosine, min_lr above base_lr, a negative rate).
  void validate() const;
};

}  // namespace noeira
