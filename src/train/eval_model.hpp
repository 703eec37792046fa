#pragma once
// `noeira eval` for one model type M (train/model_entry.hpp compiles it for each model): the saved
// values in a freshly built model, evaluated on the held-out data of its task.
#include "train/run_data.hpp"
#include "train/saved_model.hpp"

namespace noeira {

// The corpus tokenized as the model was trained: the stored vocabulary must be what the corpus
// gives (eval.cpp).
TextRun text_run_for(const TrainConfig& cfg, const SavedModel& saved, Target target,
                     std::int64_t model_vocab);

template <Module M, class Loss = void>
EvalResult eval_model(TrainConfig& cfg, Target target, SavedModel& saved) {
  check_preset_suits_data<M>(cfg);
  Context ctx = Context::for_target(target, nullptr, cfg.precision);
  M model(model_init<M>(cfg, ctx.target));
  // The data first: a preset that does not fit it is the clearer error.
  if constexpr (LanguageModel<M>) {
    const TextRun run = text_run_for(cfg, saved, target, M::vocab);
    saved.load_into(model);
    round_to_compute_values(model, ctx, cfg.precision);
    // One period of one step: the task is only asked for its validation set.
    TrainConfig eval_cfg = cfg;
    eval_cfg.steps = 1;
    eval_cfg.eval_every = 1;
    return run.task(eval_cfg, M::block).evaluate(model, ctx, nullptr);
  } else {
    const ImageRun run = load_image_run(cfg, target, M::in_dim, M::out_dim,
                                        /*train_split=*/false, own_loss_factory<Loss>(),
                                        input_vocab_of<M>());
    saved.load_into(model);
    round_to_compute_values(model, ctx, cfg.precision);
    const std::unique_ptr<TargetLoss> loss = run.test.regression() ? run.losses() : nullptr;
    return evaluate_supervised(model, ctx, run.test, cfg.eval_batch, nullptr, loss.get());
  }
}

}  // namespace noeira
