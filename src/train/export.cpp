#include "train/export.hpp"

#include <filesystem>

#include "kernels/error.hpp"
#include "train/model_description.hpp"
#include "train/model_catalogue.hpp"
#include "train/run_data.hpp"
#include "train/saved_model.hpp"
#include "train/tokenizer.hpp"
#include "train/weights_file.hpp"

namespace noeira {

ExportResult run_export(const ExportConfig& e) {
  if (e.format != "safetensors") {
    throw_unknown_name("export format", e.format, "safetensors");
  }
  const std::filesystem::path out = e.out;
  if (!io::is_safetensors_path(out)) {
    throw InputError(
        detail::concat("-o ", e.out, ": a safetensors file is named <name>.safetensors"));
  }
  TrainConfig cfg;
  cfg.params = e.params;
  cfg.eval_checkpoint = e.checkpoint;
  cfg.model = e.model;
  cfg.names = e.source_names;
  cfg.allow_non_finite = e.allow_non_finite;
  SavedModel saved = SavedModel::open(cfg);
  // Before the model is read: a preset without the map is the first thing to say.
  const NameMap names = NameMap::for_preset(e.names, saved.model());
  const ModelEntry& entry = model_catalogue().find(saved.model());
  return ExportResult{saved.model(), entry.export_safetensors(cfg, saved, names, out)};
}

}  // namespace noeira
