#include "train/saved_model.hpp"

#include "kernels/error.hpp"
#include "train/dataset.hpp"
#include "train/feature_normalization.hpp"
#include "train/model_catalogue.hpp"
#include "train/presets.hpp"
#include "train/tokenizer.hpp"

namespace noeira {

namespace {

// A value from a file, for a one-line message: at most 60 bytes, control bytes as '?'.
std::string shown(std::string_view v) {
  std::string out;
  for (const char c : v.substr(0, 60)) {
    out.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c);
  }
  return v.size() > 60 ? out + "..." : out;
}

// Whether `name` (as a file holds it) is a data set noeira knows.
bool names_data_set(std::string_view name) {
  for (const auto& row : kDatasetNames.rows) {
    if (row.name == name) return true;
  }
  return false;
}

// What a model.h5 or a checkpoint names its model and data set must be a preset and a data set
// noeira knows: `where` is "<file>: attribute" or "<dir>: label".
void check_names(const std::string& where, const std::map<std::string, std::string>& said) {
  const auto model = said.find("model");
  if (model != said.end() && !model->second.empty() &&
      model_catalogue().find_if(model->second) == nullptr) {
    throw InputError(detail::concat(where, " 'model' is '", shown(model->second),
                                    "', which names no model this program knows (",
                                    model_catalogue().names(), ")"));
  }
  const auto data = said.find("data");
  if (data != said.end() && !data->second.empty() && !names_data_set(data->second)) {
    throw InputError(detail::concat(where, " 'data' is '", shown(data->second),
                                    "', which names no data set (", kDatasetNames.joined(), ")"));
  }
}

// Whether `data` (a data set's name in a file) names a user's arrays, whose features a run may
// normalize.
bool names_arrays(const std::string& data) {
  return names_data_set(data) && !is_language_data(kDatasetNames.parse(data)) &&
         !holds_pixels(kDatasetNames.parse(data));
}

}  // namespace

void check_model_description(const std::filesystem::path& file,
                             const std::map<std::string, std::string>& attributes,
                             const ModelSizes& sizes) {
  const auto refuse = [&](std::string_view key, const std::string& problem) {
    throw InputError(
        detail::concat(file.string(), ": the root group: attribute '", key, "' ", problem));
  };
  const auto find = [&](const char* key) -> const std::string* {
    const auto it = attributes.find(key);
    return it == attributes.end() ? nullptr : &it->second;
  };
  const std::string* data = find("data");
  const std::string* vocabulary = find("vocabulary");
  if (data == nullptr) {
    // A file older than the description holds none of it.
    for (const auto& [key, value] : attributes) {
      if (key != "model" && key != "vocabulary") {
        refuse(key, "is there without 'data', the data set it would describe");
      }
    }
    return;
  }
  TrainConfig told;
  try {
    told.data = kDatasetNames.parse(*data);
  } catch (const InputError& e) {
    refuse("data", detail::concat("names no data set noeira knows (", e.what(), ")"));
  }
  if (vocabulary != nullptr) {
    if (!is_language_data(told.data)) {
      refuse("data", detail::concat("is '", shown(*data),
                                    "', but the file holds a vocabulary (a text model's)"));
    }
    told.vocabulary = *vocabulary;
    try {
      told.tokenizer = Tokenizer::from_text(*vocabulary).kind();
    } catch (const InputError& e) {
      refuse("vocabulary", detail::concat("is not a serialized tokenizer (", e.what(), ")"));
    }
  } else if (is_language_data(told.data)) {
    refuse("data", detail::concat("is '", *data, "', but the file holds no vocabulary"));
  } else if (!holds_pixels(told.data)) {
    // A user's arrays: the normalization the run applied, when it applied one.
    const std::string* mean = find("input_mean");
    const std::string* std = find("input_std");
    // io/params_file.cpp takes no other recorded loss.
    if (find("loss") != nullptr) told.loss = LossChoice::GaussianNll;
    told.input_mean = mean == nullptr ? std::string() : *mean;
    told.input_std = std == nullptr ? std::string() : *std;
    (void)parse_feature_normalization(told.input_mean, told.input_std, sizes.in_dim,
                                      file.string());
  }
  std::map<std::string, std::string> expected;
  try {
    expected = saved_attributes(told, sizes);
  } catch (const InputError& e) {
    refuse("data", detail::concat("names no data set noeira knows (", e.what(), ")"));
  }
  for (const auto& [key, value] : attributes) {
    if (key == "model") continue;
    const auto it = expected.find(key);
    if (it == expected.end()) {
      refuse(key, detail::concat("does not describe a model trained on '", shown(*data), "'"));
    }
    if (it->second != value) {
      refuse(key, detail::concat("is '", shown(value), "', but this model trained on '",
                                 shown(*data), "' has '", shown(it->second), "'"));
    }
  }
}

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
    // Every attribute noeira knows, checked (io/params_file.hpp); the description against the
    // model when it is loaded (check_model_description).
    said = io::read_params_attributes(cfg.params);
    saved.description_ = said;
    nameless = detail::concat(cfg.params, ": the file names no model");
    check_names(detail::concat(cfg.params, ": the root group: attribute"), said);
  }
  if (from_checkpoint) {
    check_names(detail::concat(saved.checkpoint_->dir().string(), ": label"), said);
  }
  auto told = [&](const char* key) {
    const auto it = said.find(key);
    return it == said.end() ? std::string() : it->second;
  };
  const std::string stored = told("model");
  if (stored.empty() && cfg.model.empty()) throw InputError(nameless + "; pass --model");
  saved.vocabulary_ = told("vocabulary");
  saved.data_ = told("data");
  // A user's arrays' normalization (an image data set's input_mean is its published statistics).
  if (names_arrays(saved.data_)) {
    saved.input_mean_ = told("input_mean");
    saved.input_std_ = told("input_std");
    const std::string loss = told("loss");
    if (!loss.empty() && loss != kLossNames.name_of(LossChoice::GaussianNll)) {
      throw InputError(detail::concat(saved.source(), ": records the loss '", shown(loss),
                                      "' (a saved model records gaussian-nll, or none)"));
    }
    saved.loss_ = loss.empty() ? LossChoice::Auto : LossChoice::GaussianNll;
  }
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
