#pragma once
// What a person sees while a run trains. On a terminal: one progress bar redrawn in place (at most
// ten times a second) and one line per epoch. Elsewhere (a log file, CI): a plain line per logged
// step and per epoch, nothing redrawn. With LogFormat::Json, stdout carries the metrics records
// only (one JSON object per line) and notes go to stderr.
#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>

#include "train/config.hpp"
#include "train/metrics.hpp"

namespace noeira {

// Whether stdout is a terminal (isatty).
bool stdout_is_terminal();

// What a program that drives training sees of it as it runs (run_train's callbacks): rank 0's
// records, as metrics.jsonl gets them: on_step at every logged step (--log-every), on_epoch after
// each epoch's (or text period's) evaluation. They run on rank 0's thread between steps, and the
// training waits for them. A callback that throws is not called again; the run finishes (no rank
// waits on rank 0's failure) and run_train then throws what it threw.
//
// should_stop is asked after every record (rank 0's, the ranks agree by one scalar sum): true
// ends the run there as at its last step — a checkpoint with --checkpoint-dir, model.h5 — with
// TrainSummary::stopped_early set (early stopping: on_epoch watches the loss, should_stop says
// when it has stopped improving). A stop at a logged step leaves that period unevaluated.
struct TrainCallbacks {
  std::function<void(const StepRecord&)> on_step;
  std::function<void(const EpochRecord&)> on_epoch;
  std::function<bool()> should_stop;
};

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

  // Calls `callbacks` with every record from now on.
  void observe(TrainCallbacks callbacks) { callbacks_ = std::move(callbacks); }
  // callbacks' should_stop, false without one (or after a callback threw; it keeps what).
  bool stop_requested();
  // What a callback threw ("on_step: ..."), empty when none did.
  const std::string& callback_failure() const { return callback_failure_; }

 private:
  void clear_bar();

  std::ostream& out_;
  std::ostream& notes_;
  LogFormat format_;
  bool terminal_;
  bool bar_shown_ = false;
  TrainCallbacks callbacks_;
  std::string callback_failure_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace noeira
