#include "train/metrics.hpp"

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "kernels/error.hpp"

namespace noeira {

nlohmann::json to_json(const StepRecord& r) {
  const std::string period(r.labels.period);
  return nlohmann::json{{"type", "step"},
                        {period, r.epoch},
                        {"step", r.step},
                        {period + "_step", r.epoch_step},
                        {"steps_per_" + period, r.steps_per_epoch},
                        {"loss", r.loss},
                        {"lr", r.lr},
                        {"grad_norm", r.grad_norm},
                        {std::string(r.labels.rate), r.samples_per_s * r.labels.rate_scale},
                        {"elapsed_s", r.elapsed_s}};
}

nlohmann::json to_json(const EpochRecord& r) {
  const std::string period(r.labels.period);
  const std::string split(r.labels.split);
  nlohmann::json j{{"type", period},
                   {period, r.epoch},
                   {period + "s", r.epochs},
                   {"step", r.step},
                   {"train_loss", r.train_loss},
                   {split + "_loss", r.test_loss}};
  // A task without an accuracy (a language model) has no such field, rather than a null.
  if (!std::isnan(r.test_accuracy)) j[split + "_accuracy"] = r.test_accuracy;
  // A regression's: the root of the mean squared error, and R² (where the split's targets vary).
  if (!std::isnan(r.test_r2)) {
    j[split + "_rmse"] = r.test_rmse;
    j[split + "_r2"] = r.test_r2;
  }
  j[split + "_samples"] = r.test_samples;
  j[std::string(r.labels.rate)] = r.samples_per_s * r.labels.rate_scale;
  j[std::string(r.labels.period_time)] = r.epoch_time_s;
  j["eval_time_s"] = r.eval_time_s;
  j["elapsed_s"] = r.elapsed_s;
  if (!std::isnan(r.gather_wait_s)) j["gather_wait_s"] = r.gather_wait_s;
  return j;
}

MetricsFile::MetricsFile(const std::filesystem::path& file, bool append)
    : path_(file), append_(append) {
  open();
}

MetricsFile::MetricsFile(const std::filesystem::path& file, bool append,
                         std::function<void()> before_open)
    : path_(file), append_(append), before_open_(std::move(before_open)) {}

void MetricsFile::open() {
  if (out_.is_open()) return;
  if (before_open_) before_open_();
  out_.open(path_, append_ ? std::ios::app : std::ios::trunc);
  if (!out_) throw InputError(detail::concat(path_.string(), ": cannot create the metrics file"));
}

void MetricsFile::write(const nlohmann::json& record) {
  open();
  out_ << record.dump() << '\n';
  out_.flush();
  if (!out_) throw Error(detail::concat(path_.string(), ": write failed (disk full?)"));
}

}  // namespace noeira
