#pragma once
// What the trainer-level policy tests share (test_dist_gpt, test_dist_vit, test_dist_batchnorm):
// one run of `train` on N simulated ranks under a sharding policy, and the contract every model
// meets: N ranks train the model one rank trains (docs/design.md's tolerance), ZeRO-1/2/3 are bit for
// bit DDP at the same N, every rank ends with the same replica.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "byte_data.hpp"
#include "core/scratch_arena.hpp"
#include "distributed/sim_process_group.hpp"
#include "gradcheck.hpp"
#include "train/dataset.hpp"
#include "train/trainer.hpp"

namespace noeira::testing {

struct TrainerRun {
  std::vector<float> params;                // rank 0's full parameters after the run
  std::vector<std::vector<float>> buffers;  // every rank's buffers, concatenated in walk order
  std::vector<double> losses;               // rank 0's step records' losses
  std::vector<double> grad_norms;           // and their gradient norms (before any clip)
  TrainSummary summary;                     // rank 0's
};

// How a run is set up beside its configuration.
struct TrainerSetup {
  InitSpec init{InitKind::Normal, 0.0f, 0.02f, 9};
  dist::PolicyOptions policy_options{256, 32};
  std::filesystem::path resume;  // a checkpoint to resume from (empty: none)
  bool checkpoint_activations = false;  // the blocks recompute their forward in vjp
  Precision precision = Precision::Fp32;  // of the matrix products (--precision)
  double grad_clip = 0.0;                 // the small runs' --grad-clip (0: none)
};

// `count` samples of `features` values uniform in [-1, 2) (as bytes), labels 0..4 in turn: a
// classification data set small enough to train through the whole trainer in milliseconds.
inline Dataset synthetic_classes(std::int64_t count, std::int64_t features, std::uint32_t seed) {
  Dataset d;
  d.name = "synthetic";
  d.count = count;
  d.features = features;
  d.num_classes = 5;
  set_value_range(d, -1.0f, 2.0f);
  for (float v : random_values(static_cast<std::size_t>(count * features), seed, -1.0f, 2.0f)) {
    d.pixels.push_back(byte_of(v, -1.0f, 2.0f));
  }
  for (std::int64_t i = 0; i < count; ++i) d.labels.push_back(static_cast<std::int32_t>(i % 5));
  return d;
}

template <Module M>
std::vector<float> all_buffers(M& model) {
  std::vector<float> out;
  for_each_buffer(model, [&](const std::string&, Tensor& t) {
    const std::vector<float> v = t.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  });
  return out;
}

// Trains model M on `ranks` simulated ranks; make_task() gives each rank its task (a
// SupervisedTask or LanguageModelTask over data the caller keeps alive). Every rank must end
// with rank 0's parameters.
template <Module M, class MakeTask>
TrainerRun train_simulated(dist::Policy policy, int ranks, const TrainConfig& cfg,
                           MakeTask&& make_task, const TrainerSetup& setup = {}) {
  TrainerRun run;
  std::vector<std::vector<float>> params(static_cast<std::size_t>(ranks));
  run.buffers.resize(static_cast<std::size_t>(ranks));
  dist::run_simulated(ranks, [&](dist::ProcessGroup& group) {
    M model(Init(Target::Cpu, setup.init));
    Context ctx = Context::for_target(Target::Cpu, nullptr, setup.precision);
    ScratchArena scratch;
    if (setup.checkpoint_activations) ctx.scratch = &scratch;
    dist::PolicyOptions options = setup.policy_options;
    options.param_dtype = param_dtype_of(setup.precision);
    dist::ShardingPolicy sharding(policy, dist::walk_units(model), group, ctx, options);
    sharding.broadcast_initial_parameters();
    auto task = make_task();
    std::ostringstream out, notes;
    Progress progress(out, notes, LogFormat::Json, false);
    const TrainSummary summary =
        train(model, ctx, cfg, task, progress, nullptr, sharding, setup.resume);
    const auto rank = static_cast<std::size_t>(group.rank());
    params[rank] = sharding.full_parameters();
    run.buffers[rank] = all_buffers(model);
    if (rank != 0) return;
    run.summary = summary;
    std::istringstream lines(out.str());
    for (std::string line; std::getline(lines, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j["type"] != "step") continue;
      run.losses.push_back(j["loss"].get<double>());
      run.grad_norms.push_back(j["grad_norm"].get<double>());
    }
  });
  for (int r = 1; r < ranks; ++r) {
    EXPECT_EQ(params[static_cast<std::size_t>(r)], params[0]) << "rank " << r << "'s replica";
  }
  run.params = std::move(params[0]);
  return run;
}

inline double worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  }
  return worst;
}

// docs/design.md's tolerance between N ranks and one: 1e-4 of the largest magnitude, plus 1e-6.
inline double rank_tolerance(const std::vector<float>& reference) {
  double scale = 0;
  for (float v : reference) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  return 1e-4 * scale + 1e-6;
}

// The contract over every policy at each world size in `world_sizes`: run(policy, n) is DDP's
// bits under ZeRO-1/2/3 (buffers too), within rank_tolerance of one rank, and its first loss is
// one rank's within 1e-5. Returns the one-rank run.
inline TrainerRun expect_every_policy_trains_as_one_rank(
    const std::function<TrainerRun(dist::Policy, int)>& run, std::vector<int> world_sizes) {
  const TrainerRun reference = run(dist::Policy::Ddp, 1);
  const double tol = rank_tolerance(reference.params);
  const double buffer_tol = rank_tolerance(reference.buffers[0]);
  for (int n : world_sizes) {
    const TrainerRun ddp = run(dist::Policy::Ddp, n);
    for (dist::Policy p : {dist::Policy::Ddp, dist::Policy::Zero1, dist::Policy::Zero2,
                           dist::Policy::Zero3}) {
      SCOPED_TRACE(::testing::Message() << to_string(p) << " at " << n << " ranks");
      const TrainerRun r = p == dist::Policy::Ddp ? ddp : run(p, n);
      if (r.params.size() != reference.params.size()) {
        ADD_FAILURE() << r.params.size() << " parameters, one rank " << reference.params.size();
        continue;
      }
      EXPECT_EQ(r.params, ddp.params) << "ZeRO must be bit-identical to DDP";
      EXPECT_EQ(r.buffers[0], ddp.buffers[0]);
      EXPECT_LE(worst_difference(r.params, reference.params), tol);
      EXPECT_LE(worst_difference(r.buffers[0], reference.buffers[0]), buffer_tol);
      for (int k = 1; k < n; ++k) {
        EXPECT_EQ(r.buffers[static_cast<std::size_t>(k)], r.buffers[0]) << "rank " << k;
      }
      if (!reference.losses.empty()) {
        EXPECT_FALSE(r.losses.empty());
        if (!r.losses.empty()) {
          EXPECT_NEAR(r.losses.front(), reference.losses.front(), 1e-5);
        }
      }
    }
  }
  return reference;
}

}  // namespace noeira::testing
