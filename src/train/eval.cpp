// `noeira eval`: a saved model (model.h5 or a checkpoint) on the held-out data of its task — the
// test split of an image data set, or the validation windows of a text corpus, tokenized with the
// model's own stored vocabulary.
#include "kernels/error.hpp"
#include "train/eval_model.hpp"
#include "train/model_catalogue.hpp"
#include "train/run.hpp"
#include "train/run_data.hpp"
#include "train/saved_model.hpp"

namespace noeira {

// The corpus tokenized as the model was trained: the stored vocabulary must be what the corpus
// gives (a char vocabulary is the training text's characters).
TextRun text_run_for(const TrainConfig& cfg, const SavedModel& saved, Target target,
                     std::int64_t model_vocab) {
  if (saved.vocabulary().empty()) {
    throw InputError(detail::concat(saved.source(), ": stores no vocabulary (not a text model)"));
  }
  const Tokenizer stored = Tokenizer::from_text(saved.vocabulary());
  TrainConfig text_cfg = cfg;
  text_cfg.tokenizer = stored.kind();
  TextRun run = load_text_run(text_cfg, target, model_vocab);
  if (!(run.tokenizer == stored)) {
    throw InputError(detail::concat(run.name, ": gives another ", to_string(text_cfg.tokenizer),
                                    " vocabulary than ", saved.source(),
                                    " was trained with (another corpus?)"));
  }
  return run;
}

EvalResult run_eval(const TrainConfig& given) {
  if (!(given.eval_batch > 0)) {
    throw InputError(detail::concat("--eval-batch must be positive, got ", given.eval_batch));
  }
  const Target target = run_target(given);
  SavedModel saved = SavedModel::open(given);
  TrainConfig cfg = given;
  cfg.model = saved.model();
  cfg.input_mean = saved.input_mean();
  cfg.input_std = saved.input_std();
  if (saved.loss() != LossChoice::Auto) cfg.loss = saved.loss();
  return model_catalogue().find(cfg.model).eval(cfg, target, saved);
}

}  // namespace noeira
