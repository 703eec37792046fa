// The noeira binary's models: every preset of train/presets.hpp, in the order of its table.
#include <algorithm>

#include "kernels/error.hpp"
#include "train/preset_entries.hpp"
#include "train/presets.hpp"

namespace noeira {

std::vector<ModelEntry> preset_entries() {
  std::vector<ModelEntry> made;
  add_image_preset_entries(made);
  add_resnet_preset_entries(made);
  add_text_preset_entries(made);
  std::vector<ModelEntry> ordered;
  for (const PresetInfo& p : kPresets) {
    const auto e = std::ranges::find(made, p.name, &ModelEntry::name);
    NOEIRA_CHECK(e != made.end(), "preset_catalogue: no entry made for preset '", p.name, "'");
    ordered.push_back(std::move(*e));
  }
  NOEIRA_CHECK(ordered.size() == made.size(), "preset_catalogue: an entry without a preset");
  return ordered;
}

ModelCatalogue preset_catalogue() { return ModelCatalogue(preset_entries()); }

}  // namespace noeira
