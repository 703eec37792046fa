#include "train/saved_model.hpp"

#include "kernels/error.hpp"

namespace noeira {

SavedModel SavedModel::open(const TrainConfig& cfg) {
  const bool from_checkpoint = !cfg.eval_checkpoint.empty();
  if (cfg.params.empty() == !from_checkpoint) {
    throw InputError(
        "give one of --params <file> (e.g. runs/<run>/model.h5) or --checkpoint <path>");
  }
  SavedModel saved;
  saved.non_finite_ = non_finite_policy(cfg);
  // What the source says of itself: a checkpoint's labels, a safetensors file's metadata,
  // model.h5's attributes.
  std::map<std::string, std::string> said;
  std::string nameless;  // what to say when it names no model
  if (from_checkpoint) {
    saved.checkpoint_.emplace(io::CheckpointReader::open(cfg.eval_checkpoint));
    said = saved.checkpoint_->meta().labels;
    nameless = detail::concat(saved.checkpoint_->dir().string(), ": the checkpoint names no model");
  } else if (io::is_safetensors_path(cfg.params)) {
    saved.params_ = cfg.params;
    saved.names_ = cfg.names;
    saved.safetensors_.emplace(io::SafetensorsFile::open(cfg.params));
    said = saved.safetensors_->metadata();
    nameless = detail::concat(cfg.params, ": the file names no model (not written by noeira "
                                          "export?)");
  } else {
    saved.params_ = cfg.params;
    said["model"] = io::read_params_model(cfg.params);
    nameless = detail::concat(cfg.params, ": the file names no model");
    for (const char* key : {"vocabulary", "data"}) {
      if (auto value = io::read_params_attribute(cfg.params, key)) said[key] = *value;
    }
  }
  auto told = [&](const char* key) {
    const auto it = said.find(key);
    return it == said.end() ? std::string() : it->second;
  };
  const std::string stored = told("model");
  if (stored.empty() && cfg.model.empty()) throw InputError(nameless + "; pass --model");
  saved.vocabulary_ = told("vocabulary");
  saved.data_ = told("data");
  saved.model_ = cfg.model.empty() ? stored : cfg.model;
  // The file's tensors against the preset before its model is built: a small file that cannot
  // fit must not cost the model's memory first.
  if (saved.safetensors_) {
    check_weights_before_building(*saved.safetensors_, saved.model_, saved.names_);
  }
  return saved;
}

std::string SavedModel::source() const {
  return checkpoint_ ? checkpoint_->dir().string() : params_.string();
}

}  // namespace noeira
