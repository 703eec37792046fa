#pragma once
// What a run reports: one record per logged step and per epoch, written as JSON lines to
// <out>/metrics.jsonl (and echoed on stdout with --log-format json).
//
// Fields named in kTimingFields depend on the machine's speed; every other field is a pure
// function of the configuration, so two runs with the same seed produce the same file once those
// are removed (tests/test_trainer.cpp checks it).
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <string_view>

namespace noeira {

inline constexpr std::array<std::string_view, 7> kTimingFields = {
    "samples_per_s", "elapsed_s",    "epoch_time_s", "eval_time_s",
    "tokens_per_s",  "train_time_s", "gather_wait_s"};

// How a task names what its records hold (train/task.hpp): classification's periods are epochs
// evaluated on the test split, in samples; a language model's are evaluation intervals on the
// validation split, in tokens. The keys of the JSON records and the words of the log lines come
// from here, so a classification run's records are the same as they always were.
struct RecordLabels {
  std::string_view period = "epoch";             // record type, and the key of its counter
  std::string_view split = "test";               // <split>_loss, <split>_accuracy, <split>_samples
  std::string_view rate = "samples_per_s";       // the throughput's key
  std::string_view rate_words = "samples/s";     // and how a log line says it
  double rate_scale = 1.0;                       // samples to the rate's unit (tokens per window)
  std::string_view period_time = "epoch_time_s"; // the period's training time
};

struct StepRecord {
  RecordLabels labels;
  std::int64_t epoch = 0;          // 1-based
  std::int64_t step = 0;           // optimizer steps completed in the run
  std::int64_t epoch_step = 0;     // steps completed in this epoch
  std::int64_t steps_per_epoch = 0;
  double loss = 0.0;               // mean training loss over the steps since the last record
  double lr = 0.0;                 // the rate of the last step
  double grad_norm = 0.0;          // global gradient norm of the last step, before clipping
  double samples_per_s = 0.0;      // training samples per second since the last record
  double elapsed_s = 0.0;          // since training started
};

struct EpochRecord {
  RecordLabels labels;
  std::int64_t epoch = 0;          // 1-based
  std::int64_t epochs = 0;
  std::int64_t step = 0;
  double train_loss = 0.0;         // mean over the epoch's training samples
  double test_loss = 0.0;          // mean over the test split
  double test_accuracy = 0.0;      // top-1, in [0, 1]; NaN where the task has none
  // Regression: the coefficient of determination and the prediction's RMSE (NaN otherwise).
  double test_r2 = std::numeric_limits<double>::quiet_NaN();
  double test_rmse = std::numeric_limits<double>::quiet_NaN();
  std::int64_t test_samples = 0;
  double samples_per_s = 0.0;      // training samples per second of the epoch (no evaluation)
  double epoch_time_s = 0.0;       // training time of the epoch
  double eval_time_s = 0.0;
  double elapsed_s = 0.0;          // since training started
  // ZeRO-3: seconds of the epoch's training time the ranks spent waiting on parameter gathers,
  // the mean over ranks (what prefetch did not hide); NaN under the other policies.
  double gather_wait_s = std::numeric_limits<double>::quiet_NaN();
};

nlohmann::json to_json(const StepRecord& r);
nlohmann::json to_json(const EpochRecord& r);

// An append-only JSON-lines file, flushed after every record so a crashed or interrupted run
// keeps what it had logged.
class MetricsFile {
 public:
  // Creates (truncates) the file, or appends to it (a resumed run continues its records); an
  // unwritable path is an InputError naming it.
  explicit MetricsFile(const std::filesystem::path& file, bool append = false);
  // Creates nothing yet: open() calls `before_open` (which writes what else the run records
  // beside the metrics) and then creates or appends. A run's records are opened once every check
  // that can refuse the run has passed (train/trainer.hpp), so that a refused run writes nothing.
  MetricsFile(const std::filesystem::path& file, bool append,
              std::function<void()> before_open);
  // Idempotent; write() opens first.
  void open();
  void write(const nlohmann::json& record);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  bool append_ = false;
  std::function<void()> before_open_;
  std::ofstream out_;
};

}  // namespace noeira
