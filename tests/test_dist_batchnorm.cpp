// Batch normalization under the trainer, every policy and world size: with synchronized
// statistics (the default) N simulated ranks train the model one rank trains, ZeRO-1/2/3 are
// bit-identical to DDP, every rank holds the same running estimates; with local statistics the
// ranks take rank 0's; and a run resumed from a checkpoint continues bit for bit, buffers included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <vector>

#include "io_test_files.hpp"
#include "distributed/sim_process_group.hpp"
#include "gradcheck.hpp"
#include "nn/activation.hpp"
#include "nn/batchnorm.hpp"
#include "nn/conv2d.hpp"
#include "nn/linear.hpp"
#include "nn/pool2d.hpp"
#include "nn/sequential.hpp"
#include "train/classification.hpp"
#include "train/trainer.hpp"

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
  d.images =
      testing::random_values(static_cast<std::size_t>(count * features), seed, -1.0f, 2.0f);
  for (std::int64_t i = 0; i < count; ++i) {
    d.labels.push_back(static_cast<std::int32_t>((i * 3 + 1) % 5));
  }
  return d;
}

struct BnRun {
  std::vector<float> params;                // rank 0's full parameters
  std::vector<std::vector<float>> buffers;  // every rank's buffers, concatenated
};

template <class M>
std::vector<float> all_buffers(M& m) {
  std::vector<float> out;
  for_each_buffer(m, [&](const std::string&, Tensor& t) {
    const std::vector<float> v = t.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  });
  return out;
}

template <class M = Model>
BnRun train_bn(dist::Policy policy, int ranks, std::int64_t epochs, const std::string& batchnorm,
               const std::filesystem::path& checkpoint_dir = {},
               const std::filesystem::path& resume = {}) {
  static const Dataset train_set = synthetic(46, M::in_dim, 1);  // batch 10: a last batch of 6
  static const Dataset test_set = synthetic(9, M::in_dim, 2);
  const ResidentData train_data = make_resident(train_set, Target::Cpu);
  const ResidentData test_data = make_resident(test_set, Target::Cpu);
  TrainConfig cfg;
  // SGD: the biases of the Linears before a BatchNorm have a gradient of rounding noise only
  // (the normalization removes their effect), which Adam would turn into steps of lr each.
  cfg.optimizer = "sgd";
  cfg.momentum = 0.9;
  cfg.schedule = "constant";
  cfg.lr = 5e-2;
  cfg.batch = 10;
  cfg.log_every = 0;
  cfg.seed = 3;
  cfg.batchnorm = batchnorm;
  cfg.policy = std::string(to_string(policy));
  cfg.checkpoint_dir = checkpoint_dir.string();
  BnRun run;
  run.buffers.resize(static_cast<std::size_t>(ranks));
  dist::run_simulated(ranks, [&](dist::ProcessGroup& group) {
    M model(Init(Target::Cpu, InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, 5}));
    Context ctx = Context::for_target(Target::Cpu);
    dist::ShardingPolicy sharding(policy, dist::walk_units(model), group, ctx,
                                  dist::PolicyOptions{64, 32});
    sharding.broadcast_initial_parameters();
    ClassificationTask task(train_data, test_data, epochs, cfg.batch, 4, cfg.seed);
    std::ostringstream out, notes;
    Progress progress(out, notes, LogFormat::Json, false);
    train(model, ctx, cfg, task, progress, nullptr, sharding, resume);
    const std::vector<float> params = sharding.full_parameters();
    if (group.rank() == 0) run.params = params;
    run.buffers[static_cast<std::size_t>(group.rank())] = all_buffers(model);
  });
  return run;
}

double worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  }
  return worst;
}

double scale_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s = std::max(s, static_cast<double>(std::fabs(x)));
  return s;
}

TEST(DistBatchNorm, SynchronizedStatisticsTrainAsOneRankUnderEveryPolicy) {
  const BnRun reference = train_bn(dist::Policy::Ddp, 1, 2, "sync");
  const double tol = 1e-4 * scale_of(reference.params) + 1e-6;
  const double buffer_tol = 1e-4 * scale_of(reference.buffers[0]) + 1e-6;
  for (int n = 2; n <= 4; ++n) {
    const BnRun ddp = train_bn(dist::Policy::Ddp, n, 2, "sync");
    for (dist::Policy p : {dist::Policy::Ddp, dist::Policy::Zero1, dist::Policy::Zero2,
                           dist::Policy::Zero3}) {
      SCOPED_TRACE(::testing::Message() << to_string(p) << " at " << n << " ranks");
      const BnRun run = p == dist::Policy::Ddp ? ddp : train_bn(p, n, 2, "sync");
      EXPECT_EQ(run.params, ddp.params) << "ZeRO must be bit-identical to DDP";
      EXPECT_EQ(run.buffers[0], ddp.buffers[0]);
      EXPECT_LE(worst_difference(run.params, reference.params), tol);
      EXPECT_LE(worst_difference(run.buffers[0], reference.buffers[0]), buffer_tol);
      for (int r = 1; r < n; ++r) {
        EXPECT_EQ(run.buffers[static_cast<std::size_t>(r)], run.buffers[0]) << "rank " << r;
      }
    }
  }
}

TEST(DistBatchNorm, ConvNetTrainsAsOneRankUnderEveryPolicy) {
  const BnRun reference = train_bn<Cnn>(dist::Policy::Ddp, 1, 2, "sync");
  const double tol = 1e-4 * scale_of(reference.params) + 1e-6;
  for (int n : {2, 3}) {
    const BnRun ddp = train_bn<Cnn>(dist::Policy::Ddp, n, 2, "sync");
    for (dist::Policy p : {dist::Policy::Zero1, dist::Policy::Zero3}) {
      SCOPED_TRACE(::testing::Message() << to_string(p) << " at " << n << " ranks");
      const BnRun run = train_bn<Cnn>(p, n, 2, "sync");
      EXPECT_EQ(run.params, ddp.params) << "ZeRO must be bit-identical to DDP";
      EXPECT_EQ(run.buffers[0], ddp.buffers[0]);
    }
    EXPECT_LE(worst_difference(ddp.params, reference.params), tol) << n << " ranks";
    EXPECT_LE(worst_difference(ddp.buffers[0], reference.buffers[0]),
              1e-4 * scale_of(reference.buffers[0]) + 1e-6);
  }
}

TEST(DistBatchNorm, LocalStatisticsAreEachRanksAndTheBuffersRankZeros) {
  const BnRun sync = train_bn(dist::Policy::Ddp, 2, 1, "sync");
  const BnRun local = train_bn(dist::Policy::Ddp, 2, 1, "local");
  // Another model: each rank normalized by its own rows' statistics.
  EXPECT_GT(worst_difference(local.params, sync.params), 1e-4);
  // Evaluated and saved: every rank holds rank 0's running estimates.
  EXPECT_EQ(local.buffers[1], local.buffers[0]);
}

TEST(DistBatchNorm, ResumedRunContinuesBitForBitWithItsBuffers) {
  testing::TempDir dir;
  const BnRun whole = train_bn(dist::Policy::Zero2, 2, 2, "sync");
  train_bn(dist::Policy::Zero2, 2, 1, "sync", dir / "ckpt");
  const std::filesystem::path latest = dir / "ckpt";
  const BnRun resumed = train_bn(dist::Policy::Zero2, 2, 2, "sync", dir / "ckpt2",
                                 io::resolve_checkpoint(latest));
  EXPECT_EQ(resumed.params, whole.params);
  EXPECT_EQ(resumed.buffers[0], whole.buffers[0]);
  // At another world size and policy: the same model within the tolerance of N ranks.
  const BnRun three = train_bn(dist::Policy::Zero3, 3, 2, "sync", dir / "ckpt3",
                               io::resolve_checkpoint(latest));
  EXPECT_LE(worst_difference(three.params, whole.params), 1e-4 * scale_of(whole.params) + 1e-6);
  EXPECT_LE(worst_difference(three.buffers[0], whole.buffers[0]),
            1e-4 * scale_of(whole.buffers[0]) + 1e-6);
}

}  // namespace
}  // namespace noeira
