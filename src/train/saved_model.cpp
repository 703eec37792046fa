#include "train/saved_model.hpp"

#include "kernels/error.hpp"

namespace noeira {

std::map<std::string, std::string> saved_attributes(const TrainConfig& cfg) {
  std::map<std::string, std::string> out;
  if (!cfg.vocabulary.empty()) out["vocabulary"] = cfg.vocabulary;
  return out;
}

SavedModel SavedModel::open(const TrainConfig& cfg) {
  const bool from_checkpoint = !cfg.eval_checkpoint.empty();
  if (cfg.params.empty() == !from_checkpoint) {
    throw InputError(
        "give one of --params <file> (e.g. runs/<run>/model.h5) or --checkpoint <path>");
  }
  SavedModel saved;
  saved.non_finite_ = non_finite_policy(cfg);
  std::string stored;
  if (from_checkpoint) {
    saved.checkpoint_.emplace(io::CheckpointReader::open(cfg.eval_checkpoint));
    const auto& labels = saved.checkpoint_->meta().labels;
    const auto model = labels.find("model");
    if (model == labels.end() && cfg.model.empty()) {
      throw InputError(detail::concat(saved.checkpoint_->dir().string(),
                                      ": the checkpoint names no model; pass --model"));
    }
    if (model != labels.end()) stored = model->second;
    const auto vocabulary = labels.find("vocabulary");
    if (vocabulary != labels.end()) saved.vocabulary_ = vocabulary->second;
  } else if (io::is_safetensors_path(cfg.params)) {
    saved.params_ = cfg.params;
    saved.names_ = cfg.names;
    saved.safetensors_.emplace(io::SafetensorsFile::open(cfg.params));
    const auto& metadata = saved.safetensors_->metadata();
    const auto model = metadata.find("model");
    if (model == metadata.end() && cfg.model.empty()) {
      throw InputError(detail::concat(cfg.params, ": the file names no model (not written by "
                                                  "noeira export?); pass --model"));
    }
    if (model != metadata.end()) stored = model->second;
    const auto vocabulary = metadata.find("vocabulary");
    if (vocabulary != metadata.end()) saved.vocabulary_ = vocabulary->second;
  } else {
    saved.params_ = cfg.params;
    stored = io::read_params_model(cfg.params);
    saved.vocabulary_ = io::read_params_attribute(cfg.params, "vocabulary").value_or("");
  }
  saved.model_ = cfg.model.empty() ? stored : cfg.model;
  return saved;
}

std::string SavedModel::source() const {
  return checkpoint_ ? checkpoint_->dir().string() : params_.string();
}

}  // namespace noeira
