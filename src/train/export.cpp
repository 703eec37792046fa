#include "train/export.hpp"

#include <filesystem>

#include "kernels/error.hpp"
#include "train/model_description.hpp"
#include "train/presets.hpp"
#include "train/run_data.hpp"
#include "train/saved_model.hpp"
#include "train/tokenizer.hpp"
#include "train/weights_file.hpp"

namespace noeira {

namespace {

// What model.h5 says of the model (train/model_description.hpp), for the file's metadata, as far
// as the source tells: its data set (and a language model's vocabulary and tokenizer). A source
// that does not name its data set (a file PyTorch wrote) passes on its vocabulary alone.
template <Module M>
std::map<std::string, std::string> described(const SavedModel& saved, M& model) {
  TrainConfig told;
  told.data = saved.data();
  told.vocabulary = saved.vocabulary();
  if (!told.vocabulary.empty()) {
    told.tokenizer = std::string(to_string(Tokenizer::from_text(told.vocabulary).kind()));
  } else if (told.data.empty() || told.data == "text") {
    return {};
  }
  std::map<std::string, std::string> out =
      saved_attributes(told, sizes_of<M>(parameter_count(model)));
  if (told.data.empty()) out.erase("data");
  return out;
}

}  // namespace

ExportResult run_export(const ExportConfig& e) {
  if (e.format != "safetensors") {
    throw_unknown_name("export format", e.format, "safetensors");
  }
  const std::filesystem::path out = e.out;
  if (!io::is_safetensors_path(out)) {
    throw InputError(
        detail::concat("-o ", e.out, ": a safetensors file is named <name>.safetensors"));
  }
  const NameScheme scheme = kNameSchemeNames.parse(e.names);
  TrainConfig cfg;
  cfg.params = e.params;
  cfg.eval_checkpoint = e.checkpoint;
  cfg.model = e.model;
  cfg.names = e.source_names;
  cfg.allow_non_finite = e.allow_non_finite;
  SavedModel saved = SavedModel::open(cfg);
  // Before the model is read: a preset without the map is the first thing to say.
  const NameMap names = NameMap::for_preset(scheme, saved.model());
  return with_preset(saved.model(), [&]<class M>(std::type_identity<M>) {
    M model(model_init<M>(cfg, Target::Cpu));
    saved.load_into(model);
    const dist::WalkUnits walk = dist::walk_units(model);
    save_weights_safetensors(out, saved.model(), names, walk, described(saved, model),
                             non_finite_policy(cfg));
    return ExportResult{saved.model(),
                        static_cast<std::int64_t>(walk.params.size() + walk.buffers.size())};
  });
}

}  // namespace noeira
