#pragma once
// What a person sees while a run trains. On a terminal: one progress bar redrawn in place (at most
// ten times a second) and one line per epoch. Elsewhere (a log file, CI): a plain line per logged
// step and per epoch, nothing redrawn. With LogFormat::Json, stdout carries the metrics records
// only (one JSON object per line) and notes go to stderr.
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string_view>

#include "train/config.hpp"
#include "train/metrics.hpp"

namespace noeira {

// Whether stdout is a terminal (isatty).
bool stdout_is_terminal();

class Progress {
 public:
  Progress(std::ostream& out, std::ostream& notes, LogFormat format, bool terminal);

  // Every step; cheap: does nothing unless the bar is due for a redraw. The bar shows the loss of
  // the last step record (NaN before the first: "-"), which the host has anyway; a running loss
  // of every step would make the host wait for the device at every step.
  void tick(std::int64_t epoch, std::int64_t epochs, std::int64_t epoch_step,
            std::int64_t steps_per_epoch, double logged_loss, double samples_per_s);
  void step(const StepRecord& r);
  void epoch(const EpochRecord& r);
  // A free-form line (run header, "saved ..."): stdout in human mode, stderr in JSON mode.
  void note(std::string_view text);

 private:
  void clear_bar();

  std::ostream& out_;
  std::ostream& notes_;
  LogFormat format_;
  bool terminal_;
  bool bar_shown_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace noeira
