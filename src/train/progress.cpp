#include "train/progress.hpp"

#include "kernels/error.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

namespace noeira {

namespace {

std::string format(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

constexpr int kBarWidth = 30;
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

}  // namespace

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

Progress::Progress(std::ostream& out, std::ostream& notes, LogFormat format, bool terminal)
    : out_(out), notes_(notes), format_(format), terminal_(terminal && format == LogFormat::Human) {}

void Progress::clear_bar() {
  if (bar_shown_) {
    out_ << "\r\033[K";
    bar_shown_ = false;
  }
}

void Progress::tick(std::int64_t epoch, std::int64_t epochs, std::int64_t epoch_step,
                    std::int64_t steps_per_epoch, double logged_loss, double samples_per_s) {
  if (!terminal_) return;
  const auto now = std::chrono::steady_clock::now();
  if (epoch_step != steps_per_epoch && now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  const int filled = static_cast<int>(kBarWidth * epoch_step / steps_per_epoch);
  std::string bar(static_cast<std::size_t>(kBarWidth), ' ');
  for (int i = 0; i < filled; ++i) bar[static_cast<std::size_t>(i)] = '=';
  if (filled < kBarWidth) bar[static_cast<std::size_t>(filled)] = '>';
  out_ << "\r\033[K"
       << format("epoch %lld/%lld [%s] %lld/%lld  loss %s  %.0f samples/s",
                 static_cast<long long>(epoch), static_cast<long long>(epochs), bar.c_str(),
                 static_cast<long long>(epoch_step), static_cast<long long>(steps_per_epoch),
                 std::isnan(logged_loss) ? "-" : format("%.4f", logged_loss).c_str(),
                 samples_per_s)
       << std::flush;
  bar_shown_ = true;
}

namespace {

// Runs `call` (a callback) unless an earlier callback failed; what it throws is kept, not thrown
// into the middle of a step (the other ranks would wait for this one forever). False when it
// did not run or threw.
template <class Call>
bool guarded(const char* name, std::string& failure, Call&& call) {
  if (!failure.empty()) return false;
  try {
    call();
    return true;
  } catch (const std::exception& e) {
    failure = detail::concat(name, ": ", e.what());
  } catch (...) {
    failure = detail::concat(name, ": an exception that is no std::exception");
  }
  return false;
}

template <class Record>
void notify(const std::function<void(const Record&)>& callback, const Record& record,
            const char* name, std::string& failure) {
  if (callback) guarded(name, failure, [&] { callback(record); });
}

}  // namespace

bool Progress::stop_requested() {
  if (!callbacks_.should_stop) return false;
  bool stop = false;
  return guarded("should_stop", callback_failure_, [&] { stop = callbacks_.should_stop(); }) &&
         stop;
}

void Progress::step(const StepRecord& r) {
  notify(callbacks_.on_step, r, "on_step", callback_failure_);
  if (format_ == LogFormat::Json) {
    out_ << to_json(r).dump() << '\n' << std::flush;
    return;
  }
  if (terminal_) return;  // the bar shows it
  out_ << format("%s %lld step %lld/%lld  loss %.4f  lr %.3g  grad norm %.3f  %.0f %s",
                 std::string(r.labels.period).c_str(), static_cast<long long>(r.epoch),
                 static_cast<long long>(r.epoch_step), static_cast<long long>(r.steps_per_epoch),
                 r.loss, r.lr, r.grad_norm, r.samples_per_s * r.labels.rate_scale,
                 std::string(r.labels.rate_words).c_str())
       << '\n'
       << std::flush;
}

void Progress::epoch(const EpochRecord& r) {
  notify(callbacks_.on_epoch, r, "on_epoch", callback_failure_);
  if (format_ == LogFormat::Json) {
    out_ << to_json(r).dump() << '\n' << std::flush;
    return;
  }
  clear_bar();
  const std::string period(r.labels.period), split(r.labels.split);
  // "epoch_time_s" reads "epoch 9.04s", "train_time_s" "train 0.11s".
  std::string time_words(r.labels.period_time);
  time_words = time_words.substr(0, time_words.find("_time_s"));
  std::string accuracy;
  if (!std::isnan(r.test_accuracy)) {
    accuracy = format("  %s acc %.2f%%", split.c_str(), 100.0 * r.test_accuracy);
  } else if (!std::isnan(r.test_r2)) {
    accuracy = format("  %s rmse %.4g  r2 %.4f", split.c_str(), r.test_rmse, r.test_r2);
  }
  out_ << format("%s %lld/%lld  train loss %.4f  %s loss %.4f%s  %.0f %s  %s %.2fs  elapsed %.1fs",
                 period.c_str(), static_cast<long long>(r.epoch), static_cast<long long>(r.epochs),
                 r.train_loss, split.c_str(), r.test_loss, accuracy.c_str(),
                 r.samples_per_s * r.labels.rate_scale, std::string(r.labels.rate_words).c_str(),
                 time_words.c_str(), r.epoch_time_s, r.elapsed_s)
       << '\n'
       << std::flush;
}

void Progress::note(std::string_view text) {
  if (format_ == LogFormat::Json) {
    notes_ << text << '\n' << std::flush;
    return;
  }
  clear_bar();
  out_ << text << '\n' << std::flush;
}

}  // namespace noeira
