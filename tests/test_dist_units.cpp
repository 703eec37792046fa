// Units at any depth and tied weights under the sharding policies: Unit<> marks inside a Repeat
// give one unit each, a parameter outside every mark is refused, a tied table is visited once
// with the gradient of both uses, and a model with a tied weight trains under every policy and
// world size as on one rank (ZeRO bit-identical to DDP).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "distributed/host_collectives.hpp"
#include "distributed/sharded_step.hpp"
#include "distributed/sim_process_group.hpp"
#include "distributed/units.hpp"
#include "gradcheck.hpp"
#include "loss/cross_entropy.hpp"
#include "nn/embedding.hpp"
#include "nn/linear.hpp"
#include "nn/lm_head.hpp"
#include "nn/repeat.hpp"
#include "nn/unit.hpp"
#include "optim/optimizer.hpp"

namespace noeira::dist {
namespace {

constexpr std::int64_t kVocab = 13, kWidth = 8, kSeq = 5, kBatch = 6;

// ids [B, T] -> tied embedding -> two tanh layers -> LM head (owning the table). Not movable:
// the embedding points at the head's table.
class TiedToy {
  using Net = Sequential<Unit<TiedEmbedding<kVocab, kWidth>>,
                         Repeat<2, Unit<LinearTanh<kWidth, kWidth>>>, Unit<LMHead<kWidth, kVocab>>>;

 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = 1;
  static constexpr std::int64_t out_dim = kVocab;

  explicit TiedToy(const Init& init) : net_(init) {
    net_.child<0>().inner().tie(net_.child<2>().inner().weight());
  }
  TiedToy(const TiedToy&) = delete;
  TiedToy& operator=(const TiedToy&) = delete;

  const Tensor& forward(Context& ctx, const Tensor& ids) { return net_.forward(ctx, ids); }
  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad g) { return net_.vjp(ctx, dy, g); }
  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    net_.for_each_param(visit, prefix);
  }

 private:
  Net net_;
};

Init toy_init() { return Init(Target::Cpu, InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, 5}); }

Tensor batch_ids(int step, std::int64_t begin, std::int64_t end) {
  std::vector<std::int32_t> ids;
  for (std::int64_t b = begin; b < end; ++b) {
    for (std::int64_t t = 0; t < kSeq; ++t) {
      ids.push_back(static_cast<std::int32_t>((step * 7 + b * 5 + t * 3) % kVocab));
    }
  }
  return Tensor::from_host_ids({end - begin, kSeq}, ids);
}

Tensor batch_labels(int step, std::int64_t begin, std::int64_t end) {
  std::vector<std::int32_t> labels;
  for (std::int64_t b = begin; b < end; ++b) {
    for (std::int64_t t = 0; t < kSeq; ++t) {
      labels.push_back(static_cast<std::int32_t>((step + b * 2 + t * 11 + 1) % kVocab));
    }
  }
  return Tensor::from_host_ids({(end - begin) * kSeq}, labels);
}

TEST(DistUnits, MarksAtAnyDepthAreUnitsAndATiedTableIsVisitedOnce) {
  TiedToy model(toy_init());
  const WalkUnits walk = walk_units(model);
  EXPECT_TRUE(walk.marked);
  EXPECT_EQ(walk.unit_params, (std::vector<std::size_t>{0, 2, 2, 1}));
  std::vector<std::string> names;
  for (const NamedParam& p : walk.params) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"1.0.weight", "1.0.bias", "1.1.weight", "1.1.bias",
                                             "2.weight"}));
  ASSERT_EQ(walk.borrowed.size(), 4u);
  ASSERT_EQ(walk.borrowed[0].size(), 1u);
  EXPECT_EQ(walk.borrowed[0][0], walk.params[4].param) << "the embedding borrows the head's table";
}

TEST(DistUnits, AParameterOutsideEveryMarkIsRefused) {
  using Half = Sequential<Unit<Linear<4, 4>>, Linear<4, 2>>;
  Half model(toy_init());
  try {
    (void)walk_units(model);
    FAIL() << "a parameter outside every unit was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 1.weight lies in no unit"), std::string::npos)
        << e.what();
  }
}

TEST(DistUnits, TheTiedTableGetsTheGradientOfBothUses) {
  TiedToy model(toy_init());
  testing::GradCheckOptions o;
  o.check_input = false;
  testing::gradcheck(model, batch_ids(0, 0, 2), o);
}

// One rank's run of the tied toy under a policy; the full parameters at the end.
std::vector<float> train_rank(ProcessGroup& pg, Policy policy) {
  TiedToy model(toy_init());
  Context ctx = Context::for_target(Target::Cpu);
  ShardingPolicy sharding(policy, walk_units(model), pg, ctx, PolicyOptions{16, 32});
  sharding.broadcast_initial_parameters();
  OptimizerConfig adam;
  adam.lr = 1e-2f;
  Optimizer opt(adam);
  CrossEntropyLoss loss;
  const std::int64_t begin = pg.rank() * kBatch / pg.size();
  const std::int64_t end = (pg.rank() + 1) * kBatch / pg.size();
  for (int s = 0; s < 8; ++s) {
    const Tensor ids = batch_ids(s, begin, end);
    const Tensor& logits = forward_units(model, ctx, ids, sharding);
    const Tensor rows = logits.view({(end - begin) * kSeq, kVocab});
    loss.forward_backward(ctx, rows, batch_labels(s, begin, end), 1.0f / (kBatch * kSeq));
    vjp_units(model, ctx, loss.grad().view(logits.shape()), InputGrad::Skip, sharding);
    sharding.reduce_gradients();
    sharding.step(opt, adam.lr);
  }
  return sharding.full_parameters();
}

std::vector<float> run(Policy policy, int ranks) {
  std::vector<float> params;
  run_simulated(ranks, [&](ProcessGroup& pg) {
    std::vector<float> mine = train_rank(pg, policy);
    if (pg.rank() == 0) params = std::move(mine);
  });
  return params;
}

TEST(DistUnits, ATiedModelTrainsUnderEveryPolicyAsOnOneRank) {
  const std::vector<float> reference = run(Policy::Ddp, 1);
  double scale = 0;
  for (float v : reference) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  const double tol = 1e-4 * scale + 1e-6;
  TiedToy fresh(toy_init());
  const WalkUnits walk = walk_units(fresh);
  const std::vector<float> initial = walk.params[4].param->val.to_vector();
  for (int n = 1; n <= 4; ++n) {
    const std::vector<float> ddp = run(Policy::Ddp, n);
    for (Policy p : {Policy::Zero1, Policy::Zero2, Policy::Zero3}) {
      SCOPED_TRACE(::testing::Message() << to_string(p) << " at " << n << " ranks");
      const std::vector<float> got = run(p, n);
      ASSERT_EQ(got.size(), reference.size());
      EXPECT_EQ(got, ddp) << "ZeRO must be bit-identical to DDP";
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::fabs(got[i] - reference[i])));
      }
      EXPECT_LE(worst, tol);
    }
  }
  // The table moved: the last kVocab·kWidth values are the tied table.
  const std::vector<float> table(reference.end() - kVocab * kWidth, reference.end());
  EXPECT_NE(table, initial);
}

}  // namespace
}  // namespace noeira::dist
