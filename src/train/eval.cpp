// `noeira eval`: a saved model (model.h5 or a checkpoint) on the held-out data of its task — the
// test split of an image data set, or the validation windows of a text corpus, tokenized with the
// model's own stored vocabulary.
#include "kernels/error.hpp"
#include "train/run.hpp"
#include "train/run_data.hpp"
#include "train/saved_model.hpp"

namespace noeira {

namespace {

// The corpus tokenized as the model was trained: the stored vocabulary must be what the corpus
// gives (a char vocabulary is the training text's characters).
TextRun text_run_for(const TrainConfig& cfg, const SavedModel& saved, Target target,
                     std::int64_t model_vocab) {
  if (saved.vocabulary().empty()) {
    throw InputError(detail::concat(saved.source(), ": stores no vocabulary (not a text model)"));
  }
  const Tokenizer stored = Tokenizer::from_text(saved.vocabulary());
  TrainConfig text_cfg = cfg;
  text_cfg.tokenizer = std::string(to_string(stored.kind()));
  TextRun run = load_text_run(text_cfg, target, model_vocab);
  if (!(run.tokenizer == stored)) {
    throw InputError(detail::concat(run.name, ": gives another ", text_cfg.tokenizer,
                                    " vocabulary than ", saved.source(),
                                    " was trained with (another corpus?)"));
  }
  return run;
}

}  // namespace

EvalResult run_eval(const TrainConfig& given) {
  if (!(given.eval_batch > 0)) {
    throw InputError(detail::concat("--eval-batch must be positive, got ", given.eval_batch));
  }
  const Target target = run_target(given);
  SavedModel saved = SavedModel::open(given);
  TrainConfig cfg = given;
  cfg.model = saved.model();
  return with_preset(cfg.model, [&]<class M>(std::type_identity<M>) {
    check_preset_suits_data<M>(cfg);
    Context ctx = Context::for_target(target, nullptr, parse_precision(cfg.precision));
    M model(model_init<M>(cfg, ctx.target));
    // The data first: a preset that does not fit it is the clearer error.
    if constexpr (LanguageModel<M>) {
      const TextRun run = text_run_for(cfg, saved, target, M::vocab);
      saved.load_into(model);
      round_to_compute_values(model, ctx, parse_precision(cfg.precision));
      // One period of one step: the task is only asked for its validation set.
      TrainConfig eval_cfg = cfg;
      eval_cfg.steps = 1;
      eval_cfg.eval_every = 1;
      return run.task(eval_cfg, M::block).evaluate(model, ctx, nullptr);
    } else {
      const ImageRun run =
          load_image_run(cfg, target, M::in_dim, M::out_dim, /*train_split=*/false);
      saved.load_into(model);
      round_to_compute_values(model, ctx, parse_precision(cfg.precision));
      return evaluate_supervised(model, ctx, run.test, cfg.eval_batch, nullptr);
    }
  });
}

}  // namespace noeira
