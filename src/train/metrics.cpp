#include "train/metrics.hpp"

#include <nlohmann/json.hpp>

#include "kernels/error.hpp"

namespace noeira {

nlohmann::json to_json(const StepRecord& r) {
  return nlohmann::json{{"type", "step"},
                        {"epoch", r.epoch},
                        {"step", r.step},
                        {"epoch_step", r.epoch_step},
                        {"steps_per_epoch", r.steps_per_epoch},
                        {"loss", r.loss},
                        {"lr", r.lr},
                        {"grad_norm", r.grad_norm},
                        {"samples_per_s", r.samples_per_s},
                        {"elapsed_s", r.elapsed_s}};
}

nlohmann::json to_json(const EpochRecord& r) {
  return nlohmann::json{{"type", "epoch"},
                        {"epoch", r.epoch},
                        {"epochs", r.epochs},
                        {"step", r.step},
                        {"train_loss", r.train_loss},
                        {"test_loss", r.test_loss},
                        {"test_accuracy", r.test_accuracy},
                        {"test_samples", r.test_samples},
                        {"samples_per_s", r.samples_per_s},
                        {"epoch_time_s", r.epoch_time_s},
                        {"eval_time_s", r.eval_time_s},
                        {"elapsed_s", r.elapsed_s}};
}

MetricsFile::MetricsFile(const std::filesystem::path& file, bool append)
    : path_(file), out_(file, append ? std::ios::app : std::ios::trunc) {
  if (!out_) throw InputError(detail::concat(file.string(), ": cannot create the metrics file"));
}

void MetricsFile::write(const nlohmann::json& record) {
  out_ << record.dump() << '\n';
  out_.flush();
  if (!out_) throw Error(detail::concat(path_.string(), ": write failed (disk full?)"));
}

}  // namespace noeira
