#pragma once
// The small trainer runs that the accumulation and activation-checkpointing tests share: a
// classifier on 46 synthetic samples under SGD with momentum, and a GPT on a repeated pangram
// under AdamW, each through the real trainer on simulated ranks.
#include <cstdint>
#include <string>

#include "train/supervised.hpp"
#include "train/language_model.hpp"
#include "train/text_data.hpp"
#include "trainer_runs.hpp"

namespace noeira::testing {

// Batches of `batch` (12 by default) over 46 samples: then the last one has 10 rows, which 4
// micro-batches cut into 2, 3, 2, 3, so at 3 ranks some ranks sit out some micro-batches. Two
// epochs.
template <Module M>
TrainerRun train_small_classifier(dist::Policy policy, int ranks, int accum,
                                  const TrainerSetup& setup, std::int64_t batch = 12) {
  static const Dataset train_set = synthetic_classes(46, 12, 1);
  static const Dataset test_set = synthetic_classes(9, 12, 2);
  const ResidentData train_data = make_resident(train_set, Target::Cpu);
  const ResidentData test_data = make_resident(test_set, Target::Cpu);
  TrainConfig cfg;
  cfg.optimizer = OptimizerKind::Sgd;
  cfg.momentum = 0.9;
  cfg.schedule = ScheduleKind::Constant;
  cfg.lr = 5e-2;
  cfg.batch = batch;
  cfg.accum = accum;
  cfg.grad_clip = setup.grad_clip;
  cfg.log_every = 1;
  cfg.seed = 3;
  cfg.policy = policy;
  return train_simulated<M>(
      policy, ranks, cfg,
      [&] { return SupervisedTask(train_data, test_data, 2, cfg.batch, 4, cfg.seed); },
      setup);
}

// Batches of 8 windows of the model's block, `steps` steps, evaluated once at the end.
template <Module M>
TrainerRun train_small_gpt(dist::Policy policy, int ranks, int accum, std::int64_t steps,
                           const TrainerSetup& setup) {
  static const TextData data = [] {
    std::string text;
    for (int i = 0; i < 200; ++i) {
      text += "pack my box with five dozen liquor jugs " + std::to_string(i % 5) + "\n";
    }
    return make_text_data("test corpus", text, TokenizerKind::Char);
  }();
  const ResidentText text = make_resident_text(data, Target::Cpu);
  TrainConfig cfg;
  cfg.optimizer = OptimizerKind::AdamW;
  cfg.lr = 3e-3;
  cfg.weight_decay = 0.1;
  cfg.batch = 8;
  cfg.accum = accum;
  cfg.grad_clip = setup.grad_clip;
  cfg.log_every = 1;
  cfg.seed = 2;
  LanguageModelOptions o;
  o.steps = steps;
  o.eval_every = steps;
  o.eval_batches = 1;
  o.batch = cfg.batch;
  o.block = M::block;
  o.seed = cfg.seed;
  return train_simulated<M>(
      policy, ranks, cfg, [&] { return LanguageModelTask(text.train, text.validation, o); },
      setup);
}

}  // namespace noeira::testing
