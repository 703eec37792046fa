#include "train/model_entry.hpp"
#include "train/preset_entries.hpp"
#include "train/presets.hpp"

namespace noeira {

void add_resnet_preset_entries(std::vector<ModelEntry>& out) {
  out.push_back(preset_entry<presets::ResNet20>("resnet20"));
  out.push_back(preset_entry<presets::ResNet20Cifar>("resnet20-cifar"));
  out.push_back(preset_entry<presets::ResNet18Cifar>("resnet18"));
}

}  // namespace noeira
