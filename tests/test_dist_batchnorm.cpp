// Batch normalization under the trainer, every policy and world size: with synchronized
// statistics (the default) N simulated ranks train the model one rank trains, ZeRO-1/2/3 are
// bit-identical to DDP, every rank holds the same running estimates; with local statistics the
// ranks take rank 0's; and a run resumed from a checkpoint continues bit for bit, buffers included.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "io_test_files.hpp"
#include "gradcheck.hpp"
#include "nn/activation.hpp"
#include "nn/batchnorm.hpp"
#include "nn/conv2d.hpp"
#include "nn/linear.hpp"
#include "nn/pool2d.hpp"
#include "nn/sequential.hpp"
#include "train/supervised.hpp"
#include "trainer_runs.hpp"

namespace noeira {
namespace {

using Model = Sequential<Linear<12, 16>, BatchNorm1D<16>, ReLU<16>, Linear<16, 8>,
                         BatchNorm1D<8>, ReLU<8>, Linear<8, 5>>;
// A conv net on 6x6 images: convolution without bias, BatchNorm2D, ReLU, max pooling, Linear.
using Cnn = Sequential<Conv2D<ConvSpec{ImageShape{1, 6, 6}, 3, 3, 1, 1, 1, 1, false}>,
                       BatchNorm2D<ImageShape{3, 6, 6}>, ReLU<108>,
                       MaxPool2D<PoolSpec{ImageShape{3, 6, 6}, 2, 2}>, Linear<27, 5>>;

Dataset synthetic(std::int64_t count, std::int64_t features, std::uint32_t seed) {
  Dataset d;
  d.name = "synthetic";
  d.count = count;
  d.features = features;
  d.num_classes = 5;
  testing::set_value_range(d, -1.0f, 2.0f);
  for (float v :
       testing::random_values(static_cast<std::size_t>(count * features), seed, -1.0f, 2.0f)) {
    d.pixels.push_back(testing::byte_of(v, -1.0f, 2.0f));
  }
  for (std::int64_t i = 0; i < count; ++i) {
    d.labels.push_back(static_cast<std::int32_t>((i * 3 + 1) % 5));
  }
  return d;
}

using testing::TrainerRun;
using testing::rank_tolerance;
using testing::worst_difference;

template <class M = Model>
TrainerRun train_bn(dist::Policy policy, int ranks, std::int64_t epochs,
                    const std::string& batchnorm, const std::filesystem::path& checkpoint_dir = {},
                    const std::filesystem::path& resume = {}) {
  static const Dataset train_set = synthetic(46, M::in_dim, 1);  // batch 10: a last batch of 6
  static const Dataset test_set = synthetic(9, M::in_dim, 2);
  const ResidentData train_data = make_resident(train_set, Target::Cpu);
  const ResidentData test_data = make_resident(test_set, Target::Cpu);
  TrainConfig cfg;
  // SGD: the biases of the Linears before a BatchNorm have a gradient of rounding noise only
  // (the normalization removes their effect), which Adam would turn into steps of lr each.
  cfg.optimizer = OptimizerKind::Sgd;
  cfg.momentum = 0.9;
  cfg.schedule = ScheduleKind::Constant;
  cfg.lr = 5e-2;
  cfg.batch = 10;
  cfg.log_every = 0;
  cfg.seed = 3;
  cfg.batchnorm = kBatchNormNames.parse(batchnorm);
  cfg.policy = policy;
  cfg.checkpoint_dir = checkpoint_dir.string();
  const testing::TrainerSetup setup{InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, 5},
                                    dist::PolicyOptions{64, 32}, resume};
  return testing::train_simulated<M>(
      policy, ranks, cfg,
      [&] { return SupervisedTask(train_data, test_data, epochs, cfg.batch, 4, cfg.seed); },
      setup);
}

TEST(DistBatchNorm, SynchronizedStatisticsTrainAsOneRankUnderEveryPolicy) {
  testing::expect_every_policy_trains_as_one_rank(
      [](dist::Policy p, int n) { return train_bn(p, n, 2, "sync"); }, {2, 3, 4});
}

TEST(DistBatchNorm, ConvNetTrainsAsOneRankUnderEveryPolicy) {
  const TrainerRun reference = train_bn<Cnn>(dist::Policy::Ddp, 1, 2, "sync");
  const double tol = rank_tolerance(reference.params);
  for (int n : {2, 3}) {
    const TrainerRun ddp = train_bn<Cnn>(dist::Policy::Ddp, n, 2, "sync");
    for (dist::Policy p : {dist::Policy::Zero1, dist::Policy::Zero3}) {
      SCOPED_TRACE(::testing::Message() << to_string(p) << " at " << n << " ranks");
      const TrainerRun run = train_bn<Cnn>(p, n, 2, "sync");
      EXPECT_EQ(run.params, ddp.params) << "ZeRO must be bit-identical to DDP";
      EXPECT_EQ(run.buffers[0], ddp.buffers[0]);
    }
    EXPECT_LE(worst_difference(ddp.params, reference.params), tol) << n << " ranks";
    EXPECT_LE(worst_difference(ddp.buffers[0], reference.buffers[0]),
              rank_tolerance(reference.buffers[0]));
  }
}

TEST(DistBatchNorm, LocalStatisticsAreEachRanksAndTheBuffersRankZeros) {
  const TrainerRun sync = train_bn(dist::Policy::Ddp, 2, 1, "sync");
  const TrainerRun local = train_bn(dist::Policy::Ddp, 2, 1, "local");
  // Another model: each rank normalized by its own rows' statistics.
  EXPECT_GT(worst_difference(local.params, sync.params), 1e-4);
  // Evaluated and saved: every rank holds rank 0's running estimates.
  EXPECT_EQ(local.buffers[1], local.buffers[0]);
}

TEST(DistBatchNorm, ResumedRunContinuesBitForBitWithItsBuffers) {
  testing::TempDir dir;
  const TrainerRun whole = train_bn(dist::Policy::Zero2, 2, 2, "sync");
  train_bn(dist::Policy::Zero2, 2, 1, "sync", dir / "ckpt");
  const std::filesystem::path latest = dir / "ckpt";
  const TrainerRun resumed = train_bn(dist::Policy::Zero2, 2, 2, "sync", dir / "ckpt2",
                                      io::resolve_checkpoint(latest));
  EXPECT_EQ(resumed.params, whole.params);
  EXPECT_EQ(resumed.buffers[0], whole.buffers[0]);
  // At another world size and policy: the same model within the tolerance of N ranks.
  const TrainerRun three = train_bn(dist::Policy::Zero3, 3, 2, "sync", dir / "ckpt3",
                                    io::resolve_checkpoint(latest));
  EXPECT_LE(worst_difference(three.params, whole.params), rank_tolerance(whole.params));
  EXPECT_LE(worst_difference(three.buffers[0], whole.buffers[0]),
            rank_tolerance(whole.buffers[0]));
}

}  // namespace
}  // namespace noeira
