// Sharding policies under the simulated backend: N ranks with the global batch split vs one rank
// with the whole batch, ZeRO-1/2/3 vs DDP bit for bit, replicas identical after the initial
// broadcast (and different before it), global-norm clipping, and memory per rank vs the formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <span>
#include <vector>

#include "dist_checks.hpp"
#include "dist_training.hpp"
#include "kernels/bf16_math.hpp"
#include "gpu_skip.hpp"
#include "distributed/sim_process_group.hpp"

namespace noeira::dist {
namespace {

using namespace harness;

struct RunResult {
  std::vector<std::vector<float>> params;            // [ranks] full parameters after the run
  std::vector<std::vector<float>> before_broadcast;  // [ranks] local initial values
  std::vector<double> losses;                        // rank 0: global mean loss per step
  std::vector<double> norms;                         // rank 0: gradient norm per step
};

RunResult train_distributed(const RunOptions& o) {
  std::vector<RankResult> ranks(static_cast<std::size_t>(o.ranks));
  run_simulated(
      o.ranks,
      [&](ProcessGroup& pg) { ranks[static_cast<std::size_t>(pg.rank())] = train_rank(pg, o); },
      {}, o.target);
  RunResult result;
  for (const RankResult& r : ranks) {
    result.params.push_back(r.params);
    result.before_broadcast.push_back(r.before_broadcast);
  }
  result.losses = ranks[0].losses;
  result.norms = ranks[0].norms;
  return result;
}

const Policy kPolicies[] = {Policy::Ddp, Policy::Zero1, Policy::Zero2, Policy::Zero3};

TEST(DistPolicy, ParseNamesEveryPolicy) {
  for (Policy p : kPolicies) EXPECT_EQ(parse_policy(to_string(p)), p);
  EXPECT_THROW(parse_policy("zero4"), InputError);
}

TEST(DistPolicy, SplitBatchMatchesOneRankWithWholeBatch) {
  std::vector<double> ref_losses;
  const std::vector<float> ref = train_single(&ref_losses);
  const double tol = 1e-4 * max_abs(ref) + 1e-6;
  EXPECT_LT(ref_losses.back(), ref_losses.front());
  for (Policy p : kPolicies) {
    for (int n = 1; n <= 4; ++n) {
      SCOPED_TRACE(::testing::Message() << to_string(p) << " at " << n << " ranks");
      const RunResult run = train_distributed({p, n});
      ASSERT_EQ(run.params[0].size(), ref.size());
      double worst = 0;
      for (std::size_t i = 0; i < ref.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::fabs(run.params[0][i] - ref[i])));
      }
      EXPECT_LE(worst, tol);
      EXPECT_LT(run.losses.back(), run.losses.front());
      EXPECT_NEAR(run.losses.front(), ref_losses.front(), 1e-5);
      // The parameters moved: a policy that never updated would fail here, not pass.
      double moved = 0;
      for (std::size_t i = 0; i < ref.size(); ++i) {
        moved = std::max(
            moved, static_cast<double>(std::fabs(run.params[0][i] - run.before_broadcast[0][i])));
      }
      EXPECT_GT(moved, 100 * tol);
    }
  }
}

TEST(DistPolicy, ZeroStagesBitIdenticalToDdp) {
  for (int n = 2; n <= 4; ++n) {
    const RunResult ddp = train_distributed({Policy::Ddp, n});
    for (Policy p : {Policy::Zero1, Policy::Zero2, Policy::Zero3}) {
      SCOPED_TRACE(::testing::Message() << to_string(p) << " at " << n << " ranks");
      const RunResult zero = train_distributed({p, n});
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(zero.params[static_cast<std::size_t>(r)],
                  ddp.params[static_cast<std::size_t>(r)]);
      }
    }
  }
}

TEST(DistPolicy, ClippingUsesTheGlobalNorm) {
  // The norm of the whole gradient, whatever the sharding; small max so that clipping fires.
  const int n = 3;
  const RunResult ddp = train_distributed({Policy::Ddp, n, 0.05});
  for (double norm : ddp.norms) EXPECT_GT(norm, 0.05);  // it fired every step
  const RunResult unclipped = train_distributed({Policy::Ddp, n});
  EXPECT_NE(ddp.params[0], unclipped.params[0]);
  for (Policy p : {Policy::Zero1, Policy::Zero2, Policy::Zero3}) {
    SCOPED_TRACE(to_string(p));
    const RunResult zero = train_distributed({p, n, 0.05});
    ASSERT_EQ(zero.norms.size(), ddp.norms.size());
    for (std::size_t s = 0; s < ddp.norms.size(); ++s) {
      EXPECT_NEAR(zero.norms[s], ddp.norms[s], 1e-6 * ddp.norms[s]);
    }
    const double tol = 1e-4 * max_abs(ddp.params[0]) + 1e-6;
    for (std::size_t i = 0; i < ddp.params[0].size(); ++i) {
      ASSERT_NEAR(zero.params[0][i], ddp.params[0][i], tol) << i;
    }
  }
}

TEST(DistPolicy, ReplicasIdenticalAfterBroadcastAndDifferentBefore) {
  for (Policy p : kPolicies) {
    SCOPED_TRACE(to_string(p));
    RunOptions o{p, 3};
    o.rank_seeds = true;
    const RunResult run = train_distributed(o);
    // Not vacuous: the replicas started different.
    EXPECT_NE(run.before_broadcast[0], run.before_broadcast[1]);
    EXPECT_NE(run.before_broadcast[1], run.before_broadcast[2]);
    for (int r = 1; r < 3; ++r) EXPECT_EQ(run.params[static_cast<std::size_t>(r)], run.params[0]);
    // ... and the broadcast made them all rank 0's: the same run as with identical seeds.
    const RunResult same_seeds = train_distributed({p, 3});
    EXPECT_EQ(run.params[0], same_seeds.params[0]);
  }
}

TEST(DistPolicy, BucketSizeAndHooksDoNotChangeResults) {
  const RunResult small = train_distributed({Policy::Ddp, 3, 0.0, false, true, 16});
  const RunResult one = train_distributed({Policy::Ddp, 3, 0.0, false, true, 1 << 20});
  EXPECT_EQ(small.params[1], one.params[1]);
  for (Policy p : {Policy::Ddp, Policy::Zero1}) {
    const RunResult plain = train_distributed({p, 3, 0.0, false, /*hooks=*/false});
    EXPECT_EQ(plain.params[2], one.params[2]) << to_string(p);
  }
  for (Policy p : {Policy::Zero2, Policy::Zero3}) {
    EXPECT_THROW(train_distributed({p, 2, 0.0, false, /*hooks=*/false}), Error) << to_string(p);
  }
}

TEST(DistPolicy, MemoryPerRankWithinFivePercentOfTheFormula) {
  for (Policy p : kPolicies) {
    for (int n : {2, 4}) {
      std::vector<MemoryReport> reports(static_cast<std::size_t>(n));
      run_simulated(n, [&](ProcessGroup& pg) {
        reports[static_cast<std::size_t>(pg.rank())] = memory_after_one_step(pg, p);
      });
      for (const MemoryReport& m : reports) {
        SCOPED_TRACE(m.to_string());
        EXPECT_EQ(m.numel, 784 * 64 + 64 + 64 * 10 + 10);
        EXPECT_NEAR(static_cast<double>(m.total_bytes()), m.formula_total_bytes(),
                    0.05 * m.formula_total_bytes());
        EXPECT_NEAR(static_cast<double>(m.param_bytes), m.formula_param_bytes,
                    0.05 * m.formula_param_bytes);
        EXPECT_NEAR(static_cast<double>(m.grad_bytes), m.formula_grad_bytes,
                    0.05 * m.formula_grad_bytes);
        EXPECT_NEAR(static_cast<double>(m.optimizer_bytes), m.formula_optimizer_bytes,
                    0.05 * m.formula_optimizer_bytes);
        EXPECT_GT(m.optimizer_bytes, 0);  // Adam's moments exist after a step
      }
    }
  }
}

// ZeRO-3 prefetch costs exactly one more gather buffer: the largest unit (the 784x64 layer with
// its bias, padded to the alignment), in the parameter bytes and in their formula alike.
TEST(DistPolicy, ZeroThreePrefetchHoldsOneMoreGatherBuffer) {
  run_simulated(2, [](ProcessGroup& pg) {
    const MemoryReport prefetched = memory_after_one_step(pg, Policy::Zero3);
    const MemoryReport plain =
        memory_after_one_step(pg, Policy::Zero3, Target::Cpu, PolicyOptions{.prefetch = false});
    const std::int64_t extra = prefetched.param_bytes - plain.param_bytes;
    EXPECT_GE(extra, 4 * (784 * 64 + 64));
    EXPECT_LT(extra, 4 * (784 * 64 + 64 + 2 * 32 * 2));
    EXPECT_DOUBLE_EQ(prefetched.formula_param_bytes - plain.formula_param_bytes,
                     static_cast<double>(extra));
    EXPECT_EQ(prefetched.grad_bytes, plain.grad_bytes);
    EXPECT_EQ(prefetched.optimizer_bytes, plain.optimizer_bytes);
  });
}

// --zero3-persist-below: a persisted unit (Wide's 64x10 layer with its bias, 650 parameters)
// keeps its whole parameters on every rank and, through the step, its whole gradient beside the
// rank's slice of it. The gradient's are 2.6 % of a rank's gradient bytes, inside the 5 % the
// test above allows, so the change they make is checked alone, in the bytes and in their
// formula alike.
TEST(DistPolicy, ZeroThreePersistedUnitsCountInTheBytesAndTheFormula) {
  run_simulated(2, [](ProcessGroup& pg) {
    const MemoryReport plain = memory_after_one_step(pg, Policy::Zero3);
    const MemoryReport persisted = memory_after_one_step(
        pg, Policy::Zero3, Target::Cpu, PolicyOptions{.persist_below = 1000});
    SCOPED_TRACE(persisted.to_string());
    constexpr double kUnit = 4.0 * (64 * 10 + 10);
    constexpr double kPadding = 4.0 * 2 * 32 * 2;  // a parameter's and a slice's alignment
    const double param_growth = static_cast<double>(persisted.param_bytes - plain.param_bytes);
    const double grad_growth = static_cast<double>(persisted.grad_bytes - plain.grad_bytes);
    EXPECT_NEAR(param_growth, kUnit, kPadding);
    EXPECT_NEAR(grad_growth, kUnit, kPadding);
    EXPECT_NEAR(persisted.formula_param_bytes - plain.formula_param_bytes, param_growth,
                kPadding);
    EXPECT_NEAR(persisted.formula_grad_bytes - plain.formula_grad_bytes, grad_growth, kPadding);
    EXPECT_EQ(persisted.optimizer_bytes, plain.optimizer_bytes);
  });
}

// Prefetch means the next unit's gather is in flight while the current unit computes: it has
// started when the unit's before-hook returns, in forward order through the forward and in
// reverse through the vjp, and a unit still held needs no gather at all. Without prefetch each
// hook starts only its own unit's gather. Net has three units; the tally counts ops as started.
TEST(DistPolicy, ZeroThreePrefetchStartsTheNextGatherBeforeTheUnitRuns) {
  for (bool prefetch : {true, false}) {
    SCOPED_TRACE(prefetch ? "prefetch" : "no prefetch");
    run_simulated(2, [&](ProcessGroup& pg) {
      Net model(Init(Target::Cpu, init_spec(1)));
      Context ctx = Context::for_target(Target::Cpu);
      ShardingPolicy policy(Policy::Zero3, walk_units(model), pg, ctx,
                            PolicyOptions{.prefetch = prefetch});
      policy.broadcast_initial_parameters();
      pg.reset_tally();
      auto gathers = [&] { return pg.tally().ops_of(Collective::AllGather); };
      // Started after each hook: forward 0, 1, 2, then vjp 2, 1, 0. With prefetch, the forward
      // of unit 0 gathers it and starts unit 1's, that of 1 starts 2's; the vjps of 2 and 1 find
      // them still held, and the vjp of 1 starts 0's.
      const std::vector<std::uint64_t> expected =
          prefetch ? std::vector<std::uint64_t>{2, 3, 3, 3, 4, 4}
                   : std::vector<std::uint64_t>{1, 2, 3, 3, 4, 5};
      std::vector<std::uint64_t> started;
      for (std::size_t u = 0; u < 3; ++u) {
        policy.before_forward(u);
        started.push_back(gathers());
        policy.after_forward(u);
      }
      for (std::size_t u = 3; u-- > 0;) {
        policy.before_vjp(u);
        started.push_back(gathers());
        policy.after_vjp(u);
      }
      EXPECT_EQ(started, expected);
      policy.reduce_gradients();
    });
  }
}

TEST(DistPolicy, RefusesWhatCannotRun) {
  run_simulated(2, [](ProcessGroup& pg) {
    Net model(Init(Target::Cpu, init_spec(1)));
    Context ctx = Context::for_target(Target::Cpu);
    ctx.grad_mode = GradMode::Accumulate;
    EXPECT_THROW(ShardingPolicy(Policy::Zero2, walk_units(model), pg, ctx), Error);
  });
}

TEST(DistPolicy, ZeroThreeParametersAreReadableOnlyInsideTheirUnit) {
  // Reading a Param outside its unit's hooks is an error naming it, never the bytes of the unit
  // gathered last; the policy's full_parameters() is the way to read them.
  run_simulated(2, [](ProcessGroup& pg) {
    Net model(Init(Target::Cpu, init_spec(1)));
    Context ctx = Context::for_target(Target::Cpu);
    ShardingPolicy policy(Policy::Zero3, walk_units(model), pg, ctx);
    policy.broadcast_initial_parameters();
    const Tensor x = Tensor::from_host({2, kIn}, testing::random_values(2 * kIn, 4));
    const Tensor labels = Tensor::from_host_ids({2}, std::vector<std::int32_t>{1, 3});
    CrossEntropyLoss loss;
    loss.forward_backward(ctx, forward_units(model, ctx, x, policy), labels, 0.5f);
    vjp_units(model, ctx, loss.grad(), InputGrad::Skip, policy);
    policy.reduce_gradients();
    Optimizer opt(adam());
    policy.step(opt, kLr);
    for (const NamedParam& p : walk_units(model).params) {
      EXPECT_THROW((void)p.param->val.data(), Error) << p.name;
      EXPECT_THROW((void)p.param->grd.data(), Error) << p.name;
    }
    EXPECT_EQ(policy.full_parameters().size(),
              static_cast<std::size_t>(policy.layout().numel()));
  });
}

TEST(CudaSimPolicy, RefusesAModelOnAnotherTargetThanTheGroup) {
  NOEIRA_REQUIRE_GPU();
  run_simulated(1, [](ProcessGroup& pg) {
    Net model(Init(Target::Cuda, init_spec(1)));
    const Context ctx = Context::for_target(Target::Cuda);
    EXPECT_THROW(ShardingPolicy(Policy::Ddp, walk_units(model), pg, ctx), InputError);
  });
}

// --- the same contracts with the simulated world on one GPU ------------------------------------

RunOptions on_gpu(RunOptions o) {
  o.target = Target::Cuda;
  return o;
}

TEST(CudaSimPolicy, SplitBatchMatchesOneRankAndTheCpu) {
  NOEIRA_REQUIRE_GPU();
  std::vector<double> ref_losses;
  const std::vector<float> ref = train_single(&ref_losses, Target::Cuda);
  std::vector<double> cpu_losses;
  const std::vector<float> cpu_ref = train_single(&cpu_losses);
  const double tol = 1e-4 * max_abs(ref) + 1e-6;
  for (std::size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(ref[i], cpu_ref[i], tol) << i;
  for (Policy p : kPolicies) {
    for (int n = 1; n <= 4; ++n) {
      SCOPED_TRACE(::testing::Message() << to_string(p) << " at " << n << " GPU ranks");
      const RunResult gpu = train_distributed(on_gpu({p, n}));
      const RunResult cpu = train_distributed({p, n});
      ASSERT_EQ(gpu.params[0].size(), ref.size());
      for (std::size_t i = 0; i < ref.size(); ++i) {
        ASSERT_NEAR(gpu.params[0][i], ref[i], tol) << i;
        ASSERT_NEAR(gpu.params[0][i], cpu.params[0][i], tol) << i;
      }
      EXPECT_LT(gpu.losses.back(), gpu.losses.front());
      for (int r = 1; r < n; ++r) EXPECT_EQ(gpu.params[static_cast<std::size_t>(r)], gpu.params[0]);
    }
  }
}

TEST(CudaSimPolicy, ZeroStagesBitIdenticalToDdp) {
  NOEIRA_REQUIRE_GPU();
  for (int n = 2; n <= 4; ++n) {
    const RunResult ddp = train_distributed(on_gpu({Policy::Ddp, n}));
    for (Policy p : {Policy::Zero1, Policy::Zero2, Policy::Zero3}) {
      SCOPED_TRACE(::testing::Message() << to_string(p) << " at " << n << " GPU ranks");
      const RunResult zero = train_distributed(on_gpu({p, n}));
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(zero.params[static_cast<std::size_t>(r)], ddp.params[static_cast<std::size_t>(r)]);
      }
    }
  }
}

// --reduce-dtype bf16 on the GPU. The simulated world's bf16 sums on the device (from_bf16 into
// fp32 scratch, to_bf16 once) are the CPU fold's bits at 3 ranks, where a sum in bf16 hop by hop
// would differ; and every policy trains with bf16 reductions on the GPU as on the CPU (within
// the products' tolerance: cuBLAS and OpenBLAS round differently), ZeRO's bits DDP's.
TEST(CudaSimPolicy, Bf16ReductionsAsOnTheCpu) {
  NOEIRA_REQUIRE_GPU();
  constexpr std::int64_t n = 4099;
  auto input = [](int rank, std::int64_t j) { return bf16_bits(checks::scrambled<float>(rank, j)); };
  std::vector<std::vector<std::uint16_t>> got(3);
  run_simulated(
      3,
      [&](ProcessGroup& pg) {
        const KernelTable& k = kernels_for(Target::Cuda);
        std::vector<std::uint16_t> host(static_cast<std::size_t>(n));
        for (std::int64_t j = 0; j < n; ++j) host[static_cast<std::size_t>(j)] = input(pg.rank(), j);
        Tensor device({(n + 1) / 2}, Target::Cuda);
        auto* bits = reinterpret_cast<std::uint16_t*>(device.data());
        k.upload(nullptr, bits, host.data(), host.size() * sizeof(std::uint16_t));
        pg.allreduce(std::span<std::uint16_t>(bits, host.size())).wait();
        k.download(nullptr, host.data(), bits, host.size() * sizeof(std::uint16_t));
        k.synchronize(nullptr);
        got[static_cast<std::size_t>(pg.rank())] = host;
      },
      {}, Target::Cuda);
  std::int64_t wrong = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    float acc = bf16_value(input(0, j));
    for (int r = 1; r < 3; ++r) acc += bf16_value(input(r, j));
    for (const auto& rank : got) wrong += rank[static_cast<std::size_t>(j)] != bf16_bits(acc);
  }
  EXPECT_EQ(wrong, 0);

  RunResult ddp;
  for (Policy p : kPolicies) {
    SCOPED_TRACE(to_string(p));
    RunOptions o{p, 3};
    o.reduce_dtype = DType::BF16;
    const RunResult cpu = train_distributed(o);
    const RunResult gpu = train_distributed(on_gpu(o));
    EXPECT_NE(gpu.params[0], train_distributed(on_gpu({p, 3})).params[0]) << "nothing was rounded";
    const double tol = 1e-4 * max_abs(cpu.params[0]) + 1e-6;
    for (std::size_t i = 0; i < cpu.params[0].size(); ++i) {
      ASSERT_NEAR(gpu.params[0][i], cpu.params[0][i], tol) << i;
    }
    EXPECT_EQ(gpu.params[2], gpu.params[0]);
    if (p == Policy::Ddp) ddp = gpu;
    else EXPECT_EQ(gpu.params[0], ddp.params[0]);
  }
}

TEST(CudaSimPolicy, ClippingBroadcastAndMemoryAsOnTheCpu) {
  NOEIRA_REQUIRE_GPU();
  const RunResult ddp = train_distributed(on_gpu({Policy::Ddp, 3, 0.05}));
  for (Policy p : {Policy::Zero1, Policy::Zero2, Policy::Zero3}) {
    SCOPED_TRACE(to_string(p));
    const RunResult zero = train_distributed(on_gpu({p, 3, 0.05}));
    ASSERT_EQ(zero.norms.size(), ddp.norms.size());
    for (std::size_t s = 0; s < ddp.norms.size(); ++s) {
      EXPECT_GT(ddp.norms[s], 0.05);
      EXPECT_NEAR(zero.norms[s], ddp.norms[s], 1e-6 * ddp.norms[s]);
    }
    RunOptions o = on_gpu({p, 3});
    o.rank_seeds = true;
    const RunResult run = train_distributed(o);
    EXPECT_NE(run.before_broadcast[0], run.before_broadcast[1]);
    EXPECT_EQ(run.params[2], run.params[0]);
    EXPECT_EQ(run.params[0], train_distributed(on_gpu({p, 3})).params[0]);
  }
  // Bytes per rank against the formula, from the policy's own device buffers.
  for (Policy p : kPolicies) {
    run_simulated(
        2,
        [&](ProcessGroup& pg) {
          const MemoryReport m = memory_after_one_step(pg, p, Target::Cuda);
          EXPECT_TRUE(within_five_percent(static_cast<double>(m.total_bytes()),
                                          m.formula_total_bytes()))
              << m.to_string();
        },
        {}, Target::Cuda);
  }
}

TEST(DistPolicy, WalkUnitsFollowSequentialChildren) {
  Net model(Init(Target::Cpu, init_spec(1)));
  const WalkUnits w = walk_units(model);
  EXPECT_EQ(w.unit_params, (std::vector<std::size_t>{2, 2, 2}));
  ASSERT_EQ(w.params.size(), 6u);
  EXPECT_EQ(w.params[0].name, "0.weight");
  EXPECT_EQ(w.params[5].name, "2.bias");
  Linear<3, 2> leaf(Init(Target::Cpu, init_spec(1)));
  EXPECT_EQ(walk_units(leaf).unit_params, (std::vector<std::size_t>{2}));
}

}  // namespace
}  // namespace noeira::dist
