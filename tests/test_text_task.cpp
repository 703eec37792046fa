// The language-modelling task driving a tiny stand-in model (an embedding and a linear head: a
// bigram model) through the step and the trainer, as the lead's GPT will be driven: one step
// under one and two simulated ranks gives the same loss, parameters and validation loss; ZeRO-3
// gives DDP's; an evaluation with more ranks than windows still agrees; and a short run of the
// trainer learns.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>  // trainer.hpp writes records but does not include it
#include <sstream>
#include <string>
#include <vector>

#include "distributed/sim_process_group.hpp"
#include "text_test_util.hpp"
#include "train/language_model.hpp"
#include "train/step.hpp"
#include "train/trainer.hpp"

namespace noeira {
namespace {

constexpr std::int64_t kBlock = 6;
constexpr std::int64_t kVocab = 32;  // the model's logits: more than the corpus's 12 ids (padded)
using Model = testing::BigramModel<kBlock, kVocab, 8>;

// 11 distinct characters, mostly one successor each: a bigram model can learn it.
TextData cycle_text() {
  std::string corpus;
  for (int i = 0; i < 80; ++i) corpus += "the cat sat on the mat. ";
  return make_text_data("cycle", corpus, TokenizerKind::Char);
}

LanguageModelOptions options(std::int64_t batch) {
  return {.steps = 40,
          .eval_every = 20,
          .eval_batches = 3,
          .batch = batch,
          .block = kBlock,
          .seed = 5,
          .loss = {}};
}

OptimizerConfig adam() {
  OptimizerConfig c;
  c.kind = OptimizerKind::Adam;
  c.lr = 1e-2f;
  return c;
}

Model make_model() {
  return Model(Init(Target::Cpu, InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, 7}));
}

struct OneStep {
  double loss = 0.0;  // the step's mean loss over the global batch's tokens
  EvalResult before;  // validation before the step
  EvalResult after;   // and after
  std::vector<float> params;
};

// Global step 0 of the run on `world` simulated ranks under `policy`.
OneStep one_step(int world, dist::Policy policy, std::int64_t batch = 4) {
  const TextData data = cycle_text();
  const ResidentText text = make_resident_text(data, Target::Cpu);
  OneStep result;
  dist::run_simulated(world, [&](dist::ProcessGroup& group) {
    Model model = make_model();
    Context ctx = Context::for_target(Target::Cpu);
    dist::ShardingPolicy sharding(policy, dist::walk_units(model), group, ctx);
    sharding.broadcast_initial_parameters();
    LanguageModelTask task(text.train, text.validation, options(batch));
    Optimizer optimizer(adam());
    LossSums sums(ctx.target, 0.0, 0.0);
    OneStep mine;
    mine.before = task.evaluate(model, ctx, &sharding);
    task.begin_period(0, ctx.target);
    train_step(model, ctx, task, 0, sharding, optimizer, sums, StepSettings{1e-2f, 0.0, false});
    mine.loss = dist::sum_over_ranks(group, sums.period()) /
                static_cast<double>(task.period_targets() / task.steps_per_period());
    mine.after = task.evaluate(model, ctx, &sharding);
    mine.params = sharding.full_parameters();  // collective under ZeRO-3
    if (group.rank() == 0) result = mine;
  });
  return result;
}

TEST(LanguageModelTask, OneStepIsTheSameOnOneAndTwoRanks) {
  const OneStep one = one_step(1, dist::Policy::Ddp);
  const OneStep two = one_step(2, dist::Policy::Ddp);
  // An untrained model is close to uniform over its 32 logits.
  EXPECT_NEAR(one.loss, std::log(32.0), 0.1);
  EXPECT_NEAR(two.loss, one.loss, 1e-6 * one.loss);
  EXPECT_NEAR(two.before.loss, one.before.loss, 1e-6 * one.before.loss);
  EXPECT_NEAR(two.after.loss, one.after.loss, 1e-6 * one.after.loss);
  EXPECT_LT(one.after.loss, one.before.loss);  // one Adam step already helps
  EXPECT_EQ(one.after.samples, 3 * 4 * kBlock);
  ASSERT_EQ(one.params.size(), two.params.size());
  double max_abs = 0.0;
  for (float p : one.params) max_abs = std::max(max_abs, static_cast<double>(std::fabs(p)));
  for (std::size_t i = 0; i < one.params.size(); ++i) {
    ASSERT_NEAR(two.params[i], one.params[i], 1e-4 * max_abs + 1e-6) << i;  // docs/design.md's tolerance
  }
}

TEST(LanguageModelTask, Zero3IsDdpBitForBit) {
  // ZeRO-3 evaluates through its per-unit gathers on every rank (a collective evaluation).
  const OneStep ddp = one_step(2, dist::Policy::Ddp);
  const OneStep zero3 = one_step(2, dist::Policy::Zero3);
  EXPECT_EQ(zero3.loss, ddp.loss);
  EXPECT_EQ(zero3.before.loss, ddp.before.loss);
  EXPECT_EQ(zero3.after.loss, ddp.after.loss);
  EXPECT_EQ(zero3.params, ddp.params);
}

TEST(LanguageModelTask, EvaluationWithMoreRanksThanWindows) {
  // A batch of 2 leaves one of 3 ranks without a validation window: it still runs a forward
  // (ZeRO-3's gathers need it) and counts nothing.
  const TextData data = cycle_text();
  const ResidentText text = make_resident_text(data, Target::Cpu);
  std::vector<double> losses;
  for (int world : {1, 3}) {
    dist::run_simulated(world, [&](dist::ProcessGroup& group) {
      Model model = make_model();
      Context ctx = Context::for_target(Target::Cpu);
      dist::ShardingPolicy sharding(dist::Policy::Zero3, dist::walk_units(model), group, ctx);
      sharding.broadcast_initial_parameters();
      LanguageModelTask task(text.train, text.validation, options(2));
      const EvalResult r = task.evaluate(model, ctx, &sharding);
      if (group.rank() == 0) losses.push_back(r.loss);
    });
  }
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_NEAR(losses[1], losses[0], 1e-6 * losses[0]);
}

TEST(LanguageModelTask, TheTrainerLearnsTheText) {
  const TextData data = cycle_text();
  ASSERT_EQ(data.tokenizer.vocab_size(), 12);
  EXPECT_EQ(data.unknown_validation, 0);
  const ResidentText text = make_resident_text(data, Target::Cpu);
  TrainConfig cfg;
  cfg.lr = 5e-2;
  cfg.batch = 4;
  cfg.log_every = 10;
  cfg.seed = 5;
  std::ostringstream out, notes;
  Progress progress(out, notes, LogFormat::Human, /*terminal=*/false);
  TrainSummary summary;
  EvalResult untrained;
  dist::run_simulated(1, [&](dist::ProcessGroup& group) {
    Model model = make_model();
    Context ctx = Context::for_target(Target::Cpu);
    dist::ShardingPolicy sharding(dist::Policy::Ddp, dist::walk_units(model), group, ctx);
    sharding.broadcast_initial_parameters();
    LanguageModelTask task(text.train, text.validation, options(cfg.batch));
    untrained = task.evaluate(model, ctx, &sharding);
    summary = train(model, ctx, cfg, task, progress, nullptr, sharding);
  });
  EXPECT_EQ(summary.steps, 40);
  EXPECT_EQ(summary.last.epoch, 2);  // two periods of 20 steps, an evaluation after each
  EXPECT_EQ(summary.last.test_samples, 3 * 4 * kBlock);
  EXPECT_LT(summary.last.test_loss, 0.6 * untrained.loss) << out.str();
  EXPECT_LT(summary.last.train_loss, 0.6 * untrained.loss);
}

}  // namespace
}  // namespace noeira
