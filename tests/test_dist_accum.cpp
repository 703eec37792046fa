// Gradient accumulation (--accum K, issue 14) through the trainer: K micro-batches of B/K rows
// train the model one batch of B trains, within docs/design.md's tolerance between world sizes, for
// every policy, world size and K; and the bit-identities that survive accumulation hold exactly.
// DDP and ZeRO-1 add local gradients before one reduction, ZeRO-2 and ZeRO-3 add reduced slices
// (distributed/grad_reducer.hpp), so ZeRO-1 is DDP's bits and ZeRO-3 ZeRO-2's at every K.
//
// The classifier has dropout (its masks follow the global row, so they must not depend on K) and
// a short last batch that leaves ranks without rows in some micro-batches; the GPT's tied head is
// a pinned unit, whose sum builds up in a slice of its own under ZeRO-2/3. Units pinned by
// --zero3-persist-below go the same way, and are checked here too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "distributed/sim_process_group.hpp"
#include "gradcheck.hpp"
#include "loss/cross_entropy.hpp"
#include "nn/dropout.hpp"
#include "nn/gpt.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"
#include "train/supervised.hpp"
#include "train/language_model.hpp"
#include "train/text_data.hpp"
#include "small_runs.hpp"

namespace noeira {
namespace {

using testing::TrainerRun;
using Classifier = Sequential<LinearReLU<12, 16>, Dropout<16, 200>, LinearTanh<16, 16>,
                              Linear<16, 5>>;
using TiedGpt = Gpt<GptShape{48, 8, 2, 2, 16}>;

TrainerRun train_classifier(dist::Policy policy, int ranks, int accum,
                            std::int64_t persist_below = 0, bool prefetch = true) {
  const testing::TrainerSetup setup{InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, 5},
                                    dist::PolicyOptions{64, 32, persist_below, prefetch}, {}};
  return testing::train_small_classifier<Classifier>(policy, ranks, accum, setup);
}

TrainerRun train_gpt(dist::Policy policy, int ranks, int accum, bool prefetch = true) {
  testing::TrainerSetup setup;
  setup.policy_options.prefetch = prefetch;
  return testing::train_small_gpt<TiedGpt>(policy, ranks, accum, 8, setup);
}

using Train = TrainerRun (*)(dist::Policy, int, int);

// The contract at every K and world size, against one rank training whole batches.
void expect_accumulation_trains_as_one_batch(Train train, const std::vector<int>& world_sizes) {
  const TrainerRun reference = train(dist::Policy::Ddp, 1, 1);
  const double tol = testing::rank_tolerance(reference.params);
  ASSERT_GE(reference.losses.size(), 2u);
  for (int k : {2, 4}) {
    for (int n : world_sizes) {
      SCOPED_TRACE(::testing::Message() << "accum " << k << " at " << n << " ranks");
      const TrainerRun ddp = train(dist::Policy::Ddp, n, k);
      const TrainerRun zero1 = train(dist::Policy::Zero1, n, k);
      const TrainerRun zero2 = train(dist::Policy::Zero2, n, k);
      const TrainerRun zero3 = train(dist::Policy::Zero3, n, k);
      EXPECT_EQ(zero1.params, ddp.params) << "ZeRO-1 adds and reduces as DDP does";
      EXPECT_EQ(zero3.params, zero2.params) << "ZeRO-3 reduces each micro-batch as ZeRO-2 does";
      for (const TrainerRun* r : {&ddp, &zero2}) {
        EXPECT_LE(testing::worst_difference(r->params, reference.params), tol);
        ASSERT_EQ(r->losses.size(), reference.losses.size());
        // Every step's loss is the same mean over the same rows, summed in other pieces.
        for (std::size_t i = 0; i < r->losses.size(); ++i) {
          EXPECT_NEAR(r->losses[i], reference.losses[i], 1e-4 * std::fabs(reference.losses[i]))
              << "step " << i + 1;
        }
      }
    }
  }
}

TEST(DistAccum, ClassifierWithDropoutTrainsAsOneBatchUnderEveryPolicy) {
  expect_accumulation_trains_as_one_batch(
      [](dist::Policy p, int n, int k) { return train_classifier(p, n, k); }, {1, 3});
}

TEST(DistAccum, TiedGptTrainsAsOneBatchUnderEveryPolicy) {
  expect_accumulation_trains_as_one_batch(
      [](dist::Policy p, int n, int k) { return train_gpt(p, n, k); }, {1, 2});
}

// Not vacuous: an accumulation that dropped a micro-batch's gradient, or counted one twice, moves
// the parameters by far more than the tolerance. One step of plain SGD shows it: the gradient of
// half the batch alone is not the batch's.
TEST(DistAccum, HalfABatchIsFarOutsideTheTolerance) {
  const TrainerRun whole = train_classifier(dist::Policy::Ddp, 1, 1);
  const TrainerRun split = train_classifier(dist::Policy::Ddp, 1, 2);
  const double tol = testing::rank_tolerance(whole.params);
  EXPECT_LE(testing::worst_difference(split.params, whole.params), tol);
  EXPECT_GT(testing::worst_difference(split.params, whole.params), 0.0)
      << "two micro-batches round differently from one batch";
}

// --zero3-persist-below: units under the threshold are held whole on every rank (pinned, as a
// tied weight is), which changes where they live and what is communicated, never a bit: ZeRO-3
// with the first and last units persisted (208 and 85 parameters, against the middle's 272) is
// ZeRO-3 without, with and without accumulation.
TEST(DistAccum, PersistedUnitsChangeNoBitOfZero3) {
  for (int k : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "accum " << k);
    const TrainerRun gathered = train_classifier(dist::Policy::Zero3, 3, k);
    const TrainerRun persisted = train_classifier(dist::Policy::Zero3, 3, k, 250);
    EXPECT_EQ(persisted.params, gathered.params);
    EXPECT_EQ(persisted.losses, gathered.losses);
  }
}

// ZeRO-3 prefetch (distributed/unit_gatherer.hpp) changes when a unit is gathered, never what
// it holds: with and without it, at K = 1 and 2, the classifier (default units, the policy's
// drivers call the hooks) and the tied GPT (Unit<> marks call them, the head is pinned) train the
// same bits, and prefetch stays ZeRO-2's bits as ZeRO-3 without it is.
TEST(DistAccum, PrefetchChangesNoBitOfZero3) {
  for (int k : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "accum " << k);
    const TrainerRun prefetched = train_classifier(dist::Policy::Zero3, 3, k);
    const TrainerRun plain = train_classifier(dist::Policy::Zero3, 3, k, 0, false);
    EXPECT_EQ(prefetched.params, plain.params);
    EXPECT_EQ(prefetched.losses, plain.losses);
    const TrainerRun gpt = train_gpt(dist::Policy::Zero3, 2, k);
    const TrainerRun gpt_plain = train_gpt(dist::Policy::Zero3, 2, k, false);
    EXPECT_EQ(gpt.params, gpt_plain.params);
    EXPECT_EQ(gpt.losses, gpt_plain.losses);
    EXPECT_EQ(gpt.params, train_gpt(dist::Policy::Zero2, 2, k).params);
  }
}

// ZeRO-2/3 keep no full gradient across micro-batches: the held bytes are K = 1's, exactly the
// formula's, and the accumulation adds exactly one slice of the largest unit (the scratch of a
// later micro-batch's reduction) and a slice of each pinned unit (the tied head's running sum).
TEST(DistAccum, ShardedGradientsStaySlicesUnderAccumulation) {
  using Wide = Gpt<GptShape{256, 16, 2, 4, 128}>;
  for (dist::Policy p : {dist::Policy::Zero2, dist::Policy::Zero3}) {
    std::vector<dist::MemoryReport> reports(2);
    std::int64_t expected_extra = 0;
    for (int k : {1, 2}) {
      dist::run_simulated(2, [&](dist::ProcessGroup& group) {
        Wide model(Init(Target::Cpu, InitSpec{InitKind::Normal, 0.0f, 0.02f, 1}));
        Context ctx = Context::for_target(Target::Cpu);
        dist::ShardingPolicy sharding(p, dist::walk_units(model), group, ctx);
        std::vector<std::int32_t> ids(2 * 16);
        for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(i % 97);
        const Tensor x = Tensor::from_host_ids({2, 16}, ids);
        CrossEntropyLoss loss;
        for (int m = 0; m < k; ++m) {
          const ScopedSetting<GradMode> mode(ctx.grad_mode, sharding.begin_micro_batch(m, k));
          const Tensor& logits = dist::forward_units(model, ctx, x, sharding);
          loss.forward_backward(ctx, logits.view({32, 256}), Tensor::from_host_ids({32}, ids),
                                1.0f / 64);
          dist::vjp_units(model, ctx, loss.grad().view(logits.shape()), InputGrad::Skip,
                          sharding);
        }
        sharding.reduce_gradients();
        Optimizer opt(OptimizerConfig{});
        sharding.step(opt, 1e-3f);
        if (group.rank() != 0) return;
        reports[static_cast<std::size_t>(k - 1)] = sharding.memory_report();
        std::int64_t largest = 0, pinned = 0;
        for (std::size_t u = 0; u < sharding.layout().unit_count(); ++u) {
          const std::int64_t shard = sharding.layout().units[u].shard_size;
          largest = std::max(largest, shard);
          if (sharding.store().pinned(u)) pinned += shard;
        }
        ASSERT_GT(pinned, 0) << "the tied head is pinned";
        expected_extra = 4 * (largest + pinned);
      });
    }
    const dist::MemoryReport& once = reports[0];
    const dist::MemoryReport& accumulated = reports[1];
    SCOPED_TRACE(accumulated.to_string());
    EXPECT_EQ(accumulated.grad_bytes, once.grad_bytes);
    EXPECT_EQ(accumulated.total_bytes(), once.total_bytes());
    EXPECT_LE(std::fabs(accumulated.total_bytes() - accumulated.formula_total_bytes()),
              0.05 * accumulated.formula_total_bytes());
    EXPECT_EQ(accumulated.transient_bytes - once.transient_bytes, expected_extra);
  }
}

}  // namespace
}  // namespace noeira
