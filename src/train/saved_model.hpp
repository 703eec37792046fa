#pragma once
// A trained model as `noeira eval` and `noeira generate` read it: from a parameters file
// (<out>/model.h5, or a .safetensors: train/weights_file.hpp) or from a checkpoint (its parameter
// values, whatever world size and policy wrote it), with the preset it names and, for a language
// model, its vocabulary.
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/bf16_values.hpp"
#include "core/module.hpp"
#include "distributed/units.hpp"
#include "io/checkpoint_reader.hpp"
#include "io/params_file.hpp"
#include "train/checkpointing.hpp"
#include "train/config.hpp"
#include "train/model_buffers.hpp"
#include "train/model_description.hpp"
#include "train/weights_file.hpp"

namespace noeira {

class SavedModel {
 public:
  // cfg.params (a model.h5 or a .safetensors, read through the map cfg.names) or
  // cfg.eval_checkpoint (a checkpoint): exactly one of them.
  static SavedModel open(const TrainConfig& cfg);

  // The preset: cfg.model when given, else the one the file names.
  const std::string& model() const { return model_; }
  // The stored vocabulary (Tokenizer::to_text), empty for a classifier.
  const std::string& vocabulary() const { return vocabulary_; }
  // The data set it was trained on ("fashion-mnist", "text"), empty where the file does not say
  // (a file written by PyTorch, a model.h5 of an older noeira).
  const std::string& data() const { return data_; }
  std::string source() const;  // the path, for messages
  // A user's arrays: the normalization training applied (the float lists input_mean, input_std;
  // empty: none), for eval to apply alike (train/feature_normalization.hpp).
  const std::string& input_mean() const { return input_mean_; }
  const std::string& input_std() const { return input_std_; }
  // The loss it was trained with where it is not its targets' default (GaussianNll), else Auto.
  LossChoice loss() const { return loss_; }

  // Fills a freshly built model of the preset with the stored values (names and shapes checked;
  // non-finite values refused unless the configuration allowed them).
  template <Module M>
  void load_into(M& model);

 private:
  std::filesystem::path params_;
  std::optional<io::CheckpointReader> checkpoint_;
  std::optional<io::SafetensorsFile> safetensors_;
  std::optional<NameScheme> names_;  // the name map asked for (none: the file's)
  std::string model_;
  std::string vocabulary_;
  std::string data_;
  std::string input_mean_, input_std_;
  LossChoice loss_ = LossChoice::Auto;
  std::map<std::string, std::string> description_;  // a model.h5's root attributes
  NonFinite non_finite_ = NonFinite::Refuse;
};

// Refuses a model.h5 whose description (train/model_description.hpp: "parameters", "input_shape",
// "labels", "tokenizer", "block", ...) is not what noeira writes for this model and its data set:
// an InputError naming the file and the first attribute that disagrees. `attributes` are
// io::read_params_attributes'; a file without "data" (older than the description) may hold no
// description at all.
void check_model_description(const std::filesystem::path& file,
                             const std::map<std::string, std::string>& attributes,
                             const ModelSizes& sizes);

// What a model trained at `precision` computes with: at bf16 every parameter rounded to
// bfloat16, the compute copy training's policy made of the fp32 masters a file holds
// (distributed/param_store.hpp), so that `eval --precision bf16` sees what training's
// validation saw.
template <Module M>
void round_to_compute_values(M& model, const Context& ctx, Precision precision) {
  if (param_dtype_of(precision) != DType::BF16) return;
  for_each_param(model, [&](const std::string&, Param& p) {
    round_to_bf16_values(*ctx.k, ctx.stream, p.val.data(), p.val.data(), p.numel());
  });
}

template <Module M>
void SavedModel::load_into(M& model) {
  const dist::WalkUnits walk = dist::walk_units(model);
  if (safetensors_) {
    load_weights_safetensors(*safetensors_, model_,
                             reading_name_map(*safetensors_, names_, model_, walk), walk,
                             non_finite_);
    return;
  }
  if (!checkpoint_) {
    check_model_description(params_, description_, sizes_of<M>(parameter_count(model)));
    io::load_params(params_, model_, walk.params, non_finite_, walk.buffers);
    return;
  }
  // The logical tensors, whatever world size and policy wrote them.
  checkpoint_->check_signature(signature_of(walk));
  load_buffers(*checkpoint_, walk, non_finite_);
  std::vector<float> values;
  for (const NamedParam& np : walk.params) {
    values.resize(static_cast<std::size_t>(np.param->numel()));
    const std::string name = io::param_tensor_name(np.name, "val");
    checkpoint_->read(name, 0, std::span<float>(values));
    refuse_non_finite(values, non_finite_,
                      detail::concat(checkpoint_->dir().string(), ": tensor '", name, "'"), "load");
    np.param->val.copy_from(values);
  }
}

}  // namespace noeira
