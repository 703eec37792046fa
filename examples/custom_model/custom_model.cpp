// A model noeira does not ship, trained by noeira's trainer under ZeRO-2 on two simulated ranks:
// what a project built against the installed library (find_package(noeira)) looks like.
//
// The data is made up here: four Gaussian clusters in 16 dimensions, held as a data set of float
// features (what `--data npy` reads from a user's arrays). The program prints the trainer's step
// and epoch lines, then the test loss before and after training, and exits non-zero unless the
// loss is finite and fell.
#include <cblas.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <random>

#include "distributed/policy.hpp"
#include "distributed/rank_stream.hpp"
#include "distributed/sim_process_group.hpp"
#include "distributed/units.hpp"
#include "nn/layernorm.hpp"
#include "nn/linear.hpp"
#include "nn/residual.hpp"
#include "nn/sequential.hpp"
#include "train/batch.hpp"
#include "train/supervised.hpp"
#include "train/trainer.hpp"

namespace {

constexpr std::int64_t kFeatures = 16;
constexpr int kClasses = 4;
constexpr int kRanks = 2;

// The model is a type: a Tanh projection, a residual GELU block, a LayerNorm and a linear head.
// Each top-level child of the Sequential is one unit that ZeRO-2 shards across the ranks.
using ResidualBlock = noeira::Residual<
    noeira::Sequential<noeira::LinearGELU<32, 64>, noeira::Linear<64, 32>>>;
using CustomNet = noeira::Sequential<noeira::LinearTanh<kFeatures, 32>, ResidualBlock,
                                     noeira::LayerNorm<32>, noeira::Linear<32, kClasses>>;

// `count` points around kClasses fixed centers (the same centers for every split: they come
// from their own seed), labels in turn.
noeira::Dataset clusters(const char* name, std::int64_t count, std::uint64_t seed) {
  std::mt19937_64 center_rng(12345);
  std::normal_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> centers(kClasses * kFeatures);
  for (float& c : centers) c = 1.5f * unit(center_rng);
  std::mt19937_64 rng(seed);
  noeira::Dataset d;
  d.name = name;
  d.count = count;
  d.features = kFeatures;
  d.num_classes = kClasses;
  std::vector<float> values;
  for (std::int64_t i = 0; i < count; ++i) {
    const int label = static_cast<int>(i % kClasses);
    d.labels.push_back(label);
    for (std::int64_t f = 0; f < kFeatures; ++f) {
      values.push_back(centers[label * kFeatures + f] + unit(rng));
    }
  }
  d.values = noeira::Tensor::from_host({count, kFeatures}, values);
  return d;
}

}  // namespace

int main() {
  using namespace noeira;
  TrainConfig cfg;  // what `noeira train` would be told
  cfg.epochs = 3;
  cfg.batch = 64;
  cfg.eval_batch = 256;
  cfg.lr = 3e-3;
  cfg.log_every = 8;
  cfg.policy = dist::Policy::Zero2;
  const ResidentData train_split = make_resident(clusters("clusters/train", 1024, 1), Target::Cpu);
  const ResidentData test_split = make_resident(clusters("clusters/test", 256, 2), Target::Cpu);

  // One thread per rank: the simulated ranks are threads sharing this process's cores.
  openblas_set_num_threads(1);
  double loss_before = 0.0;
  TrainSummary summary;
  dist::run_simulated(kRanks, [&](dist::ProcessGroup& group) {
    omp_set_num_threads(1);
    const dist::RankStream stream(group, Target::Cpu);  // destroyed after everything below
    Context ctx = Context::for_target(Target::Cpu, stream.get());
    ctx.seed = cfg.seed;
    CustomNet model(Init(Target::Cpu, InitSpec{InitKind::KaimingNormal, 0.0f, 0.02f, cfg.seed}));
    dist::ShardingPolicy policy(cfg.policy, dist::walk_units(model), group,
                                ctx, dist::PolicyOptions{});
    policy.broadcast_initial_parameters();  // rank 0's initial values on every rank
    SupervisedTask task(train_split, test_split, cfg.epochs, cfg.batch, cfg.eval_batch,
                            cfg.seed);
    // Collective: every rank evaluates its rows of the test split.
    const double before = task.evaluate(model, ctx, &policy).loss;
    // Rank 0 reports; the other ranks' progress goes nowhere.
    const bool reporter = group.rank() == 0;
    std::ostream nowhere(nullptr);
    Progress progress(reporter ? std::cout : nowhere, reporter ? std::cout : nowhere,
                      LogFormat::Human, /*terminal=*/false);
    const TrainSummary s = train(model, ctx, cfg, task, progress, /*metrics=*/nullptr, policy);
    if (reporter) {
      loss_before = before;
      summary = s;
    }
  });

  const double loss_after = summary.last.test_loss;
  std::printf("custom_model: %d simulated ranks, policy %s, %lld steps: test loss %.4f -> %.4f, "
              "test accuracy %.1f%%\n",
              kRanks, std::string(dist::to_string(cfg.policy)).c_str(), static_cast<long long>(summary.steps), loss_before,
              loss_after, 100.0 * summary.last.test_accuracy);
  if (!std::isfinite(loss_after) || !(loss_after < loss_before)) {
    std::fprintf(stderr, "custom_model: error: the test loss did not fall\n");
    return 1;
  }
  return 0;
}
