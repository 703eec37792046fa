#include "train/divergence.hpp"

#include <cmath>
#include <exception>

#include "core/finite.hpp"
#include "io/checkpoint.hpp"

namespace noeira {

std::string kept_checkpoint_note(const TrainConfig& cfg) {
  if (cfg.checkpoint_dir.empty()) return "; no model.h5 written";
  std::string latest = "none";
  try {
    if (const auto dir = io::latest_checkpoint(cfg.checkpoint_dir)) {
      latest = dir->filename().string();
    }
  } catch (const std::exception&) {
    latest = "unreadable";  // the divergence is the error to report, not this
  }
  return detail::concat("; no model.h5 or checkpoint written (latest: ", latest, ")");
}

void check_finite(double value, std::int64_t step, std::string_view what,
                  std::string_view context, const TrainConfig& cfg) {
  if (cfg.allow_non_finite || std::isfinite(value)) return;
  throw DivergedError(detail::concat("step ", step, ": non-finite ", what, " (",
                                     non_finite_name(value), ")", context,
                                     kept_checkpoint_note(cfg)));
}

}  // namespace noeira
