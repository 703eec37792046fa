#include "train/model_entry.hpp"
#include "train/preset_entries.hpp"
#include "train/presets.hpp"

namespace noeira {

void add_text_preset_entries(std::vector<ModelEntry>& out) {
  out.push_back(preset_entry<presets::GptTiny>("gpt-tiny"));
  out.push_back(preset_entry<presets::GptChar>("gpt-char"));
  out.push_back(preset_entry<presets::GptSmall>("gpt-small"));
  out.push_back(preset_entry<presets::Gpt2>("gpt2-124m"));
  out.push_back(preset_entry<presets::Gpt2Tiny>("gpt2-tiny"));
  out.push_back(preset_entry<presets::LstmTiny>("lstm-tiny"));
  out.push_back(preset_entry<presets::LstmChar>("lstm-char"));
  out.push_back(preset_entry<presets::GruChar>("gru-char"));
}

}  // namespace noeira
