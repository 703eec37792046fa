#pragma once
// `noeira export` for one model type M (train/model_entry.hpp compiles it for each model): the
// saved values in a freshly built model, written as safetensors with model.h5's description.
#include <filesystem>
#include <map>
#include <string>

#include "train/model_description.hpp"
#include "train/run_data.hpp"
#include "train/saved_model.hpp"
#include "train/tokenizer.hpp"
#include "train/weights_file.hpp"

namespace noeira {

namespace detail {

// What model.h5 says of the model (train/model_description.hpp), for the file's metadata, as far
// as the source tells: its data set (and a language model's vocabulary and tokenizer). A source
// that does not name its data set (a file PyTorch wrote) passes on its vocabulary alone.
template <Module M>
std::map<std::string, std::string> described(const SavedModel& saved, M& model) {
  TrainConfig told;
  const bool named = !saved.data().empty();  // SavedModel::open checked the name
  if (named) told.data = kDatasetNames.parse(saved.data());
  told.vocabulary = saved.vocabulary();
  told.input_mean = saved.input_mean();
  told.input_std = saved.input_std();
  told.loss = saved.loss();
  if (!told.vocabulary.empty()) {
    if (!is_language_data(told.data)) told.data = DatasetKind::Text;  // a language model's
    told.tokenizer = Tokenizer::from_text(told.vocabulary).kind();
  } else if (!named || is_language_data(told.data)) {
    return {};
  }
  std::map<std::string, std::string> out =
      saved_attributes(told, sizes_of<M>(parameter_count(model)));
  if (!named) out.erase("data");
  return out;
}

}  // namespace detail

template <Module M>
std::int64_t export_model(const TrainConfig& cfg, SavedModel& saved, const NameMap& names,
                          const std::filesystem::path& out) {
  M model(model_init<M>(cfg, Target::Cpu));
  saved.load_into(model);
  const dist::WalkUnits walk = dist::walk_units(model);
  save_weights_safetensors(out, saved.model(), names, walk, detail::described(saved, model),
                           non_finite_policy(cfg));
  return static_cast<std::int64_t>(walk.params.size() + walk.buffers.size());
}

}  // namespace noeira
