// What each rank writes to and loads from a checkpoint (ShardingPolicy::pieces, Written
// and Held): over the ranks, the written pieces cover every element of every parameter
// exactly once and point at the current values, for every policy and for world sizes that
// divide the parameters unevenly; the held pieces are everything (replicated values) or the own
// slice (sharded ones).
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "dist_training.hpp"
#include "distributed/sim_process_group.hpp"

namespace noeira::dist {
namespace {

using namespace harness;


struct Coverage {
  std::mutex mu;
  std::vector<std::vector<int>> written;  // [param][element] times written over ranks
  std::vector<std::vector<int>> held;     // [param][element] ranks holding it
  bool values_match = true;
};

class CheckpointPieces : public ::testing::TestWithParam<std::tuple<Policy, int>> {};

TEST_P(CheckpointPieces, SlicesCoverEveryElementOnceAndPointAtTheValues) {
  const auto [policy_kind, ranks] = GetParam();
  for (State state : {State::Value, State::M, State::V}) {
    Coverage cov;
    std::vector<std::int64_t> sizes;
    {
      Net probe(Init(Target::Cpu, init_spec(7)));
      for_each_param(probe, [&](const std::string&, Param& p) { sizes.push_back(p.numel()); });
    }
    for (std::int64_t n : sizes) {
      cov.written.emplace_back(static_cast<std::size_t>(n), 0);
      cov.held.emplace_back(static_cast<std::size_t>(n), 0);
    }
    run_simulated(ranks, [&](ProcessGroup& pg) {
      Net model(Init(Target::Cpu, init_spec(7)));
      const std::vector<float> initial = walk_values(model);
      Context ctx = Context::for_target(Target::Cpu);
      ShardingPolicy policy(policy_kind, walk_units(model), pg, ctx,
                            PolicyOptions{64, 32});
      policy.broadcast_initial_parameters();
      Optimizer opt(adam());
      if (state != State::Value) {
        EXPECT_TRUE(policy.pieces(state, dist::Coverage::Written).empty()) << "no moments before they exist";
        policy.allocate_optimizer_state(opt);
      }
      std::vector<std::int64_t> starts(sizes.size(), 0);
      for (std::size_t i = 1; i < sizes.size(); ++i) starts[i] = starts[i - 1] + sizes[i - 1];
      const auto written = policy.pieces(state, dist::Coverage::Written);
      const auto held = policy.pieces(state, dist::Coverage::Held);
      std::lock_guard lock(cov.mu);
      for (const auto& p : written) {
        for (std::int64_t e = 0; e < p.count; ++e) {
          ++cov.written[p.param][static_cast<std::size_t>(p.param_begin + e)];
          const float want = state == State::Value
                                 ? initial[static_cast<std::size_t>(starts[p.param] + p.param_begin + e)]
                                 : 0.0f;
          if (p.data[e] != want) cov.values_match = false;
        }
      }
      for (const auto& p : held) {
        for (std::int64_t e = 0; e < p.count; ++e) {
          ++cov.held[p.param][static_cast<std::size_t>(p.param_begin + e)];
        }
      }
    });
    const bool sharded = state == State::Value ? policy_kind == Policy::Zero3
                                               : policy_kind != Policy::Ddp;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      for (std::size_t e = 0; e < cov.written[i].size(); ++e) {
        ASSERT_EQ(cov.written[i][e], 1) << "param " << i << " element " << e;
        ASSERT_EQ(cov.held[i][e], sharded ? 1 : ranks) << "param " << i << " element " << e;
      }
    }
    EXPECT_TRUE(cov.values_match);
  }
}

INSTANTIATE_TEST_SUITE_P(
    PolicyAndRanks, CheckpointPieces,
    ::testing::Combine(::testing::Values(Policy::Ddp, Policy::Zero1, Policy::Zero2, Policy::Zero3),
                       ::testing::Values(1, 2, 3)));

}  // namespace
}  // namespace noeira::dist
