// The trainer with a Dropout model on 1 and on 3 simulated ranks: the same parameters within
// docs/design.md's tolerance. No preset has Dropout, so this is the only run that depends on the global
// row offset the trainer hands to the masks (train/step.hpp): were it 0, rank r's rows would draw
// rank 0's mask and the runs would part after the first step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "byte_data.hpp"
#include "distributed/sim_process_group.hpp"
#include "kernels/philox.hpp"
#include "nn/dropout.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"
#include "train/supervised.hpp"
#include "train/trainer.hpp"

namespace noeira {
namespace {

constexpr std::int64_t kIn = 8;
constexpr int kClasses = 4;
using DropoutNet = Sequential<LinearReLU<kIn, 32>, Dropout<32, 300>, Linear<32, kClasses>>;

Dataset noise(std::int64_t n, std::uint64_t seed) {
  Dataset d;
  d.name = "noise";
  d.count = n;
  d.features = kIn;
  d.num_classes = kClasses;
  testing::set_value_range(d, -0.5f, 0.5f);
  for (std::int64_t i = 0; i < n; ++i) {
    d.labels.push_back(static_cast<std::int32_t>(i % kClasses));
    for (std::int64_t f = 0; f < kIn; ++f) {
      const philox::Block b =
          philox::at(seed, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(f));
      d.pixels.push_back(testing::byte_of(philox::to_unit_open(b.v[0]) - 0.5f, -0.5f, 0.5f));
    }
  }
  return d;
}

// Rank 0's full parameters after a short run on `world` simulated ranks.
std::vector<float> train_on(int world) {
  TrainConfig cfg;
  cfg.epochs = 2;
  cfg.batch = 30;  // 10 rows per rank at 3 ranks: every rank but 0 has a non-zero offset
  cfg.eval_batch = 60;
  cfg.log_every = 0;
  cfg.lr = 1e-2;
  cfg.seed = 5;
  const ResidentData train_set = make_resident(noise(120, 1), Target::Cpu);
  const ResidentData test_set = make_resident(noise(60, 2), Target::Cpu);
  std::vector<float> params;
  dist::run_simulated(world, [&](dist::ProcessGroup& group) {
    Context ctx = Context::for_target(Target::Cpu);
    ctx.seed = cfg.seed;
    DropoutNet model(Init(Target::Cpu, InitSpec{InitKind::KaimingNormal, 0.0f, 0.02f, 7}));
    dist::ShardingPolicy policy(dist::Policy::Ddp, dist::walk_units(model), group, ctx);
    policy.broadcast_initial_parameters();
    SupervisedTask task(train_set, test_set, cfg.epochs, cfg.batch, cfg.eval_batch,
                            cfg.seed);
    std::ostringstream out, notes;
    Progress progress(out, notes, LogFormat::Human, /*terminal=*/false);
    (void)train(model, ctx, cfg, task, progress, nullptr, policy);
    std::vector<float> full = policy.full_parameters();
    if (group.rank() == 0) params = std::move(full);
  });
  return params;
}

TEST(TrainerDropout, ThreeSimulatedRanksMatchOneRank) {
  const std::vector<float> one = train_on(1);
  const std::vector<float> three = train_on(3);
  ASSERT_EQ(one.size(), three.size());
  double max_abs = 0.0;
  for (float v : one) max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
  const double tolerance = 1e-4 * max_abs + 1e-6;
  for (std::size_t i = 0; i < one.size(); ++i) {
    ASSERT_NEAR(one[i], three[i], tolerance) << "parameter element " << i;
  }
}

}  // namespace
}  // namespace noeira
