#pragma once
// model_entry<M>: a model type as the command line knows it — train, eval, export and (for a
// language model) generate compiled for M, under a name --model selects. The presets are made
// this way (preset_catalogue.cpp), and so is a user's own model (docs/library.md):
//
//   using Net = noeira::Sequential<noeira::LinearReLU<16, 64>, noeira::Linear<64, 4>>;
//   int main(int argc, char** argv) {
//     return noeira::run_command_line(argc, argv, {noeira::model_entry<Net>("net", "my model")});
//   }
//
// M is a Module with in_dim and out_dim (features in, classes or targets out), or a language
// model with vocab and block (train/presets.hpp, LanguageModel). Loss, where given, is the model's
// own loss of float targets (a class derived from noeira::TargetLoss, loss/target_loss.hpp),
// which train and eval use in place of --loss's.
#include <string>
#include <utility>
#include <vector>

#include "train/eval_model.hpp"
#include "train/export_model.hpp"
#include "train/generate_model.hpp"
#include "train/model_catalogue.hpp"
#include "train/train_model.hpp"

namespace noeira {

template <Module M, class Loss = void>
ModelEntry model_entry(std::string name, std::string description,
                       std::vector<FlagValue> defaults = {}) {
  static_assert(std::is_void_v<Loss> || !LanguageModel<M>,
                "a language model's loss is the next token's cross-entropy");
  ModelEntry e;
  e.name = std::move(name);
  e.description = std::move(description);
  e.defaults = std::move(defaults);
  if constexpr (requires { { M::shape } -> std::convertible_to<GptShape>; }) {
    e.gpt_shape = &M::shape;
  }
  e.train = &train_model<M, Loss>;
  e.eval = &eval_model<M, Loss>;
  e.export_safetensors = &export_model<M>;
  if constexpr (LanguageModel<M>) e.generate = &generate_with_model<M>;
  return e;
}

// The same for a preset of train/presets.hpp: its name, description and defaults.
template <Module M>
ModelEntry preset_entry(std::string_view preset) {
  const PresetInfo* info = find_preset(preset);
  NOEIRA_CHECK(info != nullptr, "preset_entry: no preset '", preset, "'");
  std::vector<FlagValue> defaults;
  for (const FlagDefault& d : info->defaults) {
    defaults.push_back({std::string(d.flag), std::string(d.value)});
  }
  return model_entry<M>(std::string(info->name), std::string(info->description),
                        std::move(defaults));
}

}  // namespace noeira
