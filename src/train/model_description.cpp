#include "train/model_description.hpp"

#include <nlohmann/json.hpp>

#include "kernels/error.hpp"
#include "train/dataset.hpp"

namespace noeira {

namespace {

// Floats as the decimal a person wrote (0.2860f prints as 0.286, not 0.28600001335144043).
nlohmann::json short_floats(std::span<const float> values) {
  nlohmann::json out = nlohmann::json::array();
  for (const float v : values) out.push_back(std::stod(detail::concat(v)));
  return out;
}

void describe_images(std::map<std::string, std::string>& out, DatasetKind kind,
                     const ModelSizes& m) {
  const PixelStats stats = pixel_stats(kind);
  const ImageShape& image = stats.image;
  out["input"] = detail::concat(
      "float32 rows of ", m.in_dim, " = an image [channels, height, width] in row-major order "
      "(a batch is NCHW); value = (pixel / 255 - input_mean[channel]) / input_std[channel]");
  out["input_shape"] = nlohmann::json{image.channels, image.height, image.width}.dump();
  out["input_mean"] = short_floats(stats.mean).dump();
  out["input_std"] = short_floats(stats.std).dump();
  out["output"] = detail::concat("float32 logits [rows, ", m.out_dim,
                                 "]; the class is the arg-max, named by labels");
  nlohmann::json labels = nlohmann::json::array();
  for (const std::string_view name : class_names(kind)) labels.push_back(std::string(name));
  out["labels"] = labels.dump();
}

// A user's arrays (--data npy, h5, arrays): no names to record; the features are the files', or
// their normalization is recorded.
void describe_arrays(std::map<std::string, std::string>& out, const TrainConfig& cfg,
                     const ModelSizes& m) {
  if (cfg.input_mean.empty()) {
    out["input"] = detail::concat("float32 rows of ", m.in_dim,
                                  " features, as the training arrays (x) held them");
  } else {
    // The very lists the run applied (train/feature_normalization.hpp).
    out["input"] = detail::concat(
        "float32 rows of ", m.in_dim, " features: value = (x - input_mean[f]) / input_std[f] for "
        "x as the training arrays held it (lists of one value: the same for every feature)");
    out["input_mean"] = cfg.input_mean;
    out["input_std"] = cfg.input_std;
  }
  if (cfg.loss == LossChoice::GaussianNll) {
    // What eval must score it with, and what its outputs are.
    out["loss"] = kLossNames.name_of(cfg.loss);
    out["output"] = detail::concat("float32 [rows, ", m.out_dim, "]: the ", m.out_dim / 2,
                                   " predicted targets (Gaussian means), then their ",
                                   m.out_dim / 2, " variances");
    return;
  }
  out["output"] = detail::concat("float32 [rows, ", m.out_dim,
                                 "]: class logits (the class is the arg-max) for integer labels "
                                 "y, the predicted targets for float targets y");
}

}  // namespace

std::map<std::string, std::string> saved_attributes(const TrainConfig& cfg, const ModelSizes& m) {
  std::map<std::string, std::string> out;
  out["data"] = to_string(cfg.data);
  out["parameters"] = detail::concat(m.parameters);
  if (cfg.vocabulary.empty()) {
    const DatasetKind kind = cfg.data;
    if (holds_pixels(kind)) {
      describe_images(out, kind, m);
    } else {
      describe_arrays(out, cfg, m);
    }
    return out;
  }
  out["tokenizer"] = to_string(cfg.tokenizer);
  out["block"] = detail::concat(m.block);
  out["vocabulary"] = cfg.vocabulary;
  out["input"] = detail::concat("int token ids [rows, up to ", m.block,
                                "] from the tokenizer the vocabulary attribute serializes");
  out["output"] = detail::concat("float32 next-token logits [rows, tokens, ", m.out_dim, "]");
  return out;
}

}  // namespace noeira
