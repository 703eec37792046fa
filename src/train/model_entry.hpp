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
// model with vocab and block (train/presets.hpp, LanguageModel).
#include <string>
#include <utility>
#include <vector>

#include "train/eval_model.hpp"
#include "train/export_model.hpp"
#include "train/generate_model.hpp"
#include "train/model_catalogue.hpp"
#include "train/train_model.hpp"

namespace noeira {

template <Module M>
ModelEntry model_entry(std::string name, std::string description,
                       std::vector<FlagValue> defaults = {}) {
  ModelEntry e;
  e.name = std::move(name);
  e.description = std::move(description);
  e.defaults = std::move(defaults);
  if constexpr (requires { { M::shape } -> std::convertible_to<GptShape>; }) {
    e.gpt_shape = &M::shape;
  }
  e.train = &train_model<M>;
  e.eval = &eval_model<M>;
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
