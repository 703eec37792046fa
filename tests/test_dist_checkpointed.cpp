// Activation checkpointing through the trainer (issue 14): under every policy, at one rank and
// several, with and without accumulation, a run whose blocks recompute their forward in vjp
// trains the bits of the same run without it: parameters, buffers (synchronized BatchNorm's
// running estimates, moved once per forward although the forward runs twice) and every loss.
// ZeRO-3 gathers each block's parameters once for its vjp, and the recomputation runs on them.
#include <gtest/gtest.h>

#include "nn/activation.hpp"
#include "nn/batchnorm.hpp"
#include "nn/checkpointed.hpp"
#include "nn/dropout.hpp"
#include "nn/gpt.hpp"
#include "nn/linear.hpp"
#include "nn/residual.hpp"
#include "nn/sequential.hpp"
#include "nn/unit.hpp"
#include "small_runs.hpp"

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
  testing::TrainerSetup setup;
  setup.checkpoint_activations = checkpoint;
  return testing::train_small_classifier<Classifier>(policy, ranks, accum, setup);
}

TrainerRun train_gpt(dist::Policy policy, int ranks, int accum, bool checkpoint) {
  testing::TrainerSetup setup;
  setup.checkpoint_activations = checkpoint;
  return testing::train_small_gpt<SmallGpt>(policy, ranks, accum, 6, setup);
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
