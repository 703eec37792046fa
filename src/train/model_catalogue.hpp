#pragma once
// The models `--model` can name: an entry per model type, holding what each subcommand does with
// that type, compiled where the type is known (train/model_entry.hpp makes an entry from a type).
// The noeira binary's catalogue is its presets (preset_catalogue); a user's program hands its own
// models to the same command line (cli/command_line.hpp), so a preset and a user's model take one
// path through train, eval, export and generate.
//
// The catalogue the subcommands resolve names in is the process's (model_catalogue): the command
// line installs it before it parses anything; a program that calls run_train itself without
// installing one gets the presets.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/target.hpp"

namespace noeira {

struct TrainConfig;
struct TrainOutcome;
struct TrainLaunch;
struct EvalResult;
struct GenerateConfig;
struct GptShape;
class SavedModel;
class NameMap;
class Tokenizer;

// A value a model gives a flag that the command line and the config file leave unset: for a
// model that trains best with other settings than the defaults, or a program whose data is
// always of one kind (--data npy).
struct FlagValue {
  std::string flag;  // "--lr"
  std::string value;
};

struct ModelEntry {
  std::string name;         // what --model says
  std::string description;  // one line for --help
  std::vector<FlagValue> defaults;
  const GptShape* gpt_shape = nullptr;  // a GPT's shape: its tensors are known without building it

  // The subcommands' bodies for this type (train/model_entry.hpp); generate is null for a model
  // that is not a language model.
  TrainOutcome (*train)(TrainConfig& cfg, const TrainLaunch& launch) = nullptr;
  EvalResult (*eval)(TrainConfig& cfg, Target target, SavedModel& saved) = nullptr;
  // Writes `saved` as safetensors under `names`; returns the number of tensors written.
  std::int64_t (*export_safetensors)(const TrainConfig& cfg, SavedModel& saved,
                                     const NameMap& names,
                                     const std::filesystem::path& out) = nullptr;
  std::string (*generate)(const GenerateConfig& g, const TrainConfig& cfg, Target target,
                          SavedModel& saved, const Tokenizer& tokenizer,
                          const std::vector<std::int32_t>& prompt) = nullptr;

  // Reads token ids and predicts the next one (--data text): what generate is for.
  bool language_model() const { return generate != nullptr; }
};

class ModelCatalogue {
 public:
  // At least one entry, each with a name of its own (letters, digits, '-', '_', '.') and every
  // body set: an InputError naming the entry otherwise.
  explicit ModelCatalogue(std::vector<ModelEntry> entries);

  // The entry called `name`; an unknown name is an InputError listing the catalogue's names.
  const ModelEntry& find(std::string_view name) const;
  // The entry called `name`, or null.
  const ModelEntry* find_if(std::string_view name) const;
  std::span<const ModelEntry> entries() const { return entries_; }
  // The names, comma-separated, for messages.
  std::string names() const;

 private:
  std::vector<ModelEntry> entries_;
};

// The built-in presets (train/presets.hpp), in the order --help lists them; and their catalogue.
std::vector<ModelEntry> preset_entries();
ModelCatalogue preset_catalogue();

// The catalogue of this process: the one installed last, else the presets.
const ModelCatalogue& model_catalogue();
// Installs `catalogue` for the rest of the process (the command line does, before it parses).
// Not while a run is under way: the subcommands hold references into it.
void install_model_catalogue(ModelCatalogue catalogue);

}  // namespace noeira
