// Activation checkpointing through the trainer (issue 14): under every policy, at one rank and
// several, with and without accumulation, a run whose blocks recompute their forward in vjp
// trains the bits of the same run without it: parameters, buffers (synchronized BatchNorm's
// running estimates, moved once per forward although the forward runs twice) and every loss.
// ZeRO-3 gathers each block's parameters once for its vjp, and the recomputation runs on them.
#include <gtest/gtest.h>

#include <string>

#include "nn/activation.hpp"
#include "nn/batchnorm.hpp"
#include "nn/checkpointed.hpp"
#include "nn/dropout.hpp"
#include "nn/gpt.hpp"
#include "nn/linear.hpp"
#include "nn/residual.hpp"
#include "nn/sequential.hpp"
#include "nn/unit.hpp"
#include "train/classification.hpp"
#include "train/language_model.hpp"
#include "train/text_data.hpp"
#include "trainer_runs.hpp"

namespace noeira {
namespace {

using testing::TrainerRun;

// Residual blocks of BatchNorm, dropout and a matrix, each its own unit, checkpointed inside it.
template <int Permille>
using RecomputedBlock = Unit<Checkpointed<
    Residual<Sequential<BatchNorm1D<16>, ReLU<16>, Dropout<16, Permille>, Linear<16, 16>>>>>;
using Classifier = Sequential<Unit<Linear<12, 16>>, RecomputedBlock<200>, RecomputedBlock<100>, Unit<Linear<16, 5>>>;
using SmallGpt = Gpt<GptShape{48, 8, 3, 2, 16}>;

TrainerRun train_classifier(dist::Policy policy, int ranks, int accum, bool checkpoint) {
  static const Dataset train_set = testing::synthetic_classes(46, 12, 1);
  static const Dataset test_set = testing::synthetic_classes(9, 12, 2);
  const ResidentData train_data = make_resident(train_set, Target::Cpu);
  const ResidentData test_data = make_resident(test_set, Target::Cpu);
  TrainConfig cfg;
  cfg.optimizer = "sgd";
  cfg.momentum = 0.9;
  cfg.schedule = "constant";
  cfg.lr = 5e-2;
  cfg.batch = 12;
  cfg.accum = accum;
  cfg.log_every = 1;
  cfg.seed = 3;
  testing::TrainerSetup setup;
  setup.checkpoint_activations = checkpoint;
  return testing::train_simulated<Classifier>(
      policy, ranks, cfg,
      [&] { return ClassificationTask(train_data, test_data, 2, cfg.batch, 4, cfg.seed); },
      setup);
}

TrainerRun train_gpt(dist::Policy policy, int ranks, int accum, bool checkpoint) {
  static const TextData data = [] {
    std::string text;
    for (int i = 0; i < 200; ++i) text += "sphinx of black quartz, judge my vow " + std::to_string(i % 7) + "\n";
    return make_text_data("test corpus", text, TokenizerKind::Char);
  }();
  const ResidentText text = make_resident_text(data, Target::Cpu);
  TrainConfig cfg;
  cfg.optimizer = "adamw";
  cfg.lr = 3e-3;
  cfg.weight_decay = 0.1;
  cfg.batch = 8;
  cfg.accum = accum;
  cfg.log_every = 1;
  cfg.seed = 2;
  LanguageModelOptions o;
  o.steps = 6;
  o.eval_every = 6;
  o.eval_batches = 1;
  o.batch = cfg.batch;
  o.block = SmallGpt::block;
  o.seed = cfg.seed;
  testing::TrainerSetup setup;
  setup.checkpoint_activations = checkpoint;
  return testing::train_simulated<SmallGpt>(
      policy, ranks, cfg, [&] { return LanguageModelTask(text.train, text.validation, o); },
      setup);
}

using Train = TrainerRun (*)(dist::Policy, int, int, bool);

void expect_checkpointing_trains_the_same_bits(Train train, int ranks) {
  for (dist::Policy p :
       {dist::Policy::Ddp, dist::Policy::Zero1, dist::Policy::Zero2, dist::Policy::Zero3}) {
    for (int n : {1, ranks}) {
      for (int k : {1, 2}) {
        SCOPED_TRACE(::testing::Message() << to_string(p) << " at " << n << " ranks, accum " << k);
        const TrainerRun plain = train(p, n, k, false);
        const TrainerRun checkpointed = train(p, n, k, true);
        ASSERT_FALSE(plain.losses.empty());
        EXPECT_EQ(checkpointed.params, plain.params);
        EXPECT_EQ(checkpointed.buffers, plain.buffers);
        EXPECT_EQ(checkpointed.losses, plain.losses);
      }
    }
  }
}

TEST(DistCheckpointed, BatchNormAndDropoutBlocksTrainTheSameBitsUnderEveryPolicy) {
  expect_checkpointing_trains_the_same_bits(train_classifier, 3);
}

TEST(DistCheckpointed, GptTrainsTheSameBitsUnderEveryPolicy) {
  expect_checkpointing_trains_the_same_bits(train_gpt, 2);
}

}  // namespace
}  // namespace noeira
