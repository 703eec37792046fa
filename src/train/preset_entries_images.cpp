#include "train/model_entry.hpp"
#include "train/preset_entries.hpp"
#include "train/presets.hpp"

namespace noeira {

void add_image_preset_entries(std::vector<ModelEntry>& out) {
  out.push_back(preset_entry<presets::Mlp>("mlp"));
  out.push_back(preset_entry<presets::Linear784>("linear"));
  out.push_back(preset_entry<presets::MlpCifar>("mlp-cifar"));
  out.push_back(preset_entry<presets::Cnn>("cnn"));
  out.push_back(preset_entry<presets::VitTiny>("vit-tiny"));
}

}  // namespace noeira
