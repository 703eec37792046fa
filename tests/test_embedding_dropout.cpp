// Embedding (ids in, no input gradient) and Dropout (counter-based mask).
#include <gtest/gtest.h>
#include <omp.h>

#include <string>

#include "kernels/dropout_math.hpp"
#include "leaf_util.hpp"
#include "nn/dropout.hpp"
#include "nn/embedding.hpp"
#include "nn/sequential.hpp"

namespace noeira {
namespace {

using testing::gradcheck;
using testing::kLeafInit;
using testing::random_input;

Tensor ids_tensor(Shape shape, std::vector<std::int32_t> ids) {
  return Tensor::from_host_ids(std::move(shape), ids);
}

// --- Embedding ---------------------------------------------------------------------------

TEST(Embedding, ForwardLooksUpRows) {
  Context ctx = Context::for_target(Target::Cpu);
  Embedding<5, 3> emb(kLeafInit);
  std::vector<float> w;
  for_each_param(emb, [&](const std::string&, Param& p) { w = p.val.to_vector(); });
  Tensor ids = ids_tensor({4}, {3, 0, 3, 4});
  const Tensor& y = emb.forward(ctx, ids);
  EXPECT_EQ(y.shape(), (Shape{4, 3}));
  const std::vector<float> ys = y.to_vector();
  const int want[] = {3, 0, 3, 4};
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(ys[r * 3 + c], w[want[r] * 3 + c]);
  }
}

TEST(Embedding, TableIsDrawnFromNormalWithStd002) {
  Embedding<200, 50> emb(kLeafInit);
  std::vector<float> w;
  for_each_param(emb, [&](const std::string& name, Param& p) {
    EXPECT_EQ(name, "weight");
    EXPECT_EQ(p.shape(), (Shape{200, 50}));
    w = p.val.to_vector();
  });
  double mean = 0.0, sq = 0.0;
  for (float v : w) mean += v;
  mean /= static_cast<double>(w.size());
  for (float v : w) sq += (v - mean) * (v - mean);
  EXPECT_NEAR(mean, 0.0, 1e-3);
  EXPECT_NEAR(std::sqrt(sq / static_cast<double>(w.size())), 0.02, 1e-3);
}

TEST(Embedding, AcceptsIdsOfAnyShapeAndAppendsTheWidth) {
  // Sequences: [B, T] ids are B·T lookups, [B, T, Dim] out (the module contract's rows).
  Context ctx = Context::for_target(Target::Cpu);
  Embedding<5, 3> emb(kLeafInit);
  EXPECT_EQ(emb.forward(ctx, ids_tensor({2, 1}, {1, 2})).shape(), (Shape{2, 1, 3}));
  const Tensor& y = emb.forward(ctx, ids_tensor({2, 2}, {0, 1, 2, 3}));
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  const Tensor& rows = emb.forward(ctx, ids_tensor({4}, {0, 1, 2, 3}));
  EXPECT_EQ(rows.shape(), (Shape{4, 3}));
}

TEST(Embedding, RejectsIdsOutsideTheVocabularyNamingIdAndRow) {
  Context ctx = Context::for_target(Target::Cpu);
  Embedding<5, 3> emb(kLeafInit);
  for (std::int32_t bad : {5, -1, 1000}) {
    Tensor ids = ids_tensor({3}, {0, bad, 4});
    try {
      emb.forward(ctx, ids);
      ADD_FAILURE() << "id " << bad << " was accepted";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("id " + std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("row 1"), std::string::npos) << msg;
    }
  }
  Tensor floats = random_input(3, 1, 1);
  EXPECT_THROW(emb.forward(ctx, floats), InputError);
  // A sequence batch names the flat row of the bad id.
  try {
    emb.forward(ctx, ids_tensor({2, 2}, {0, 1, 7, 3}));
    ADD_FAILURE() << "id 7 was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("id 7 at row 2"), std::string::npos) << e.what();
  }
}

TEST(Embedding, HasNoInputGradient) {
  Context ctx = Context::for_target(Target::Cpu);
  Embedding<5, 3> emb(kLeafInit);
  Tensor ids = ids_tensor({2}, {1, 2});
  emb.forward(ctx, ids);
  Tensor dy = random_input(2, 3, 4);
  EXPECT_THROW(emb.vjp(ctx, dy, InputGrad::Compute), InputError);
  EXPECT_FALSE(emb.vjp(ctx, dy, InputGrad::Skip).defined());
}

TEST(Embedding, TableGradientMatchesFiniteDifferences) {
  testing::GradCheckOptions o;
  o.check_input = false;  // ids are integers
  o.max_checked_per_tensor = 200;
  for (std::int64_t rows : testing::test_row_counts(31)) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    Embedding<11, 7> emb(kLeafInit);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(rows));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7) % 4);
    gradcheck(emb, ids_tensor({rows}, ids), o);
  }
}

TEST(Embedding, RepeatedIdsSumTheirRowsAndGradModeIsRespected) {
  Context ctx = Context::for_target(Target::Cpu);
  Embedding<4, 2> emb(kLeafInit);
  Tensor ids = ids_tensor({3}, {2, 0, 2});
  emb.forward(ctx, ids);
  Tensor dy = Tensor::from_host({3, 2}, std::vector<float>{1, 2, 10, 20, 100, 200});
  emb.vjp(ctx, dy, InputGrad::Skip);
  const std::vector<float> once = {10, 20, 0, 0, 101, 202, 0, 0};
  EXPECT_EQ(testing::param_grad(emb, "weight"), once);
  emb.vjp(ctx, dy, InputGrad::Skip);
  EXPECT_EQ(testing::param_grad(emb, "weight"), once) << "Overwrite must not accumulate";
  ctx.grad_mode = GradMode::Accumulate;
  emb.vjp(ctx, dy, InputGrad::Skip);
  EXPECT_EQ(testing::param_grad(emb, "weight"),
            (std::vector<float>{20, 40, 0, 0, 202, 404, 0, 0}));
}

TEST(Embedding, TableGradientIsIdenticalForOneAndTwoThreads) {
  auto run = [](int threads) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    Context ctx = Context::for_target(Target::Cpu);
    Embedding<17, 256> emb(kLeafInit);
    std::vector<std::int32_t> ids(600);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * i) % 17);
    Tensor t = ids_tensor({600}, ids);
    emb.forward(ctx, t);
    Tensor dy = random_input(600, 256, 3);
    emb.vjp(ctx, dy, InputGrad::Skip);
    omp_set_num_threads(before);
    return testing::param_grad(emb, "weight");
  };
  EXPECT_EQ(run(1), run(2));
}

// --- Dropout -----------------------------------------------------------------------------

using Drop = Dropout<64, 300>;  // p = 0.3

Context train_context(std::uint64_t seed, std::uint64_t step, std::int64_t row_offset) {
  Context ctx = Context::for_target(Target::Cpu);
  ctx.seed = seed;
  ctx.step = step;
  ctx.row_offset = row_offset;
  return ctx;
}

std::vector<float> dropout_output(Drop& d, Context ctx, const Tensor& x) {
  return d.forward(ctx, x).to_vector();
}

TEST(Dropout, KeptElementsAreScaledAndTheRestZero) {
  Drop d(kLeafInit);
  Tensor x = random_input(8, 64, 1, 0.5f, 1.5f);  // never 0, so a zero output means dropped
  const std::vector<float> xs = x.to_vector();
  const std::vector<float> y = dropout_output(d, train_context(1, 0, 0), x);
  int dropped = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0.0f) {
      ++dropped;
    } else {
      EXPECT_FLOAT_EQ(y[i], xs[i] / 0.7f);
    }
  }
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, static_cast<int>(y.size()));
}

TEST(Dropout, MaskIsAFunctionOfSeedStepAndGlobalRow) {
  Drop d(kLeafInit);
  Tensor x = random_input(8, 64, 2, 0.5f, 1.5f);
  const std::vector<float> base = dropout_output(d, train_context(1, 5, 0), x);
  EXPECT_EQ(dropout_output(d, train_context(1, 5, 0), x), base) << "same key, same mask";
  EXPECT_NE(dropout_output(d, train_context(1, 6, 0), x), base) << "another step";
  EXPECT_NE(dropout_output(d, train_context(2, 5, 0), x), base) << "another seed";
  EXPECT_NE(dropout_output(d, train_context(1, 5, 8), x), base) << "other global rows";

  // A rank holding global rows [3, 8) applies the same mask to them as one rank holding all.
  const std::vector<float> xs = x.to_vector();
  Tensor tail = Tensor::from_host({5, 64}, std::vector<float>(xs.begin() + 3 * 64, xs.end()));
  const std::vector<float> shard = dropout_output(d, train_context(1, 5, 3), tail);
  EXPECT_EQ(shard, std::vector<float>(base.begin() + 3 * 64, base.end()));
}

TEST(Dropout, LayersAtDifferentPathsDrawDifferentMasks) {
  Sequential<Dropout<32, 500>, Dropout<32, 500>> net(kLeafInit);
  Context ctx = train_context(3, 1, 0);
  Tensor x = random_input(4, 32, 3, 0.5f, 1.5f);
  const std::vector<float> first = net.child<0>().forward(ctx, x).to_vector();
  const std::vector<float> second = net.child<1>().forward(ctx, x).to_vector();
  EXPECT_NE(first, second);
}

TEST(Dropout, KeptFractionIsOneMinusP) {
  Dropout<1024, 300> d(kLeafInit);
  Tensor x(Shape{256, 1024});
  x.copy_from(std::vector<float>(256 * 1024, 1.0f));
  Context ctx = train_context(11, 3, 0);
  const std::vector<float> y = d.forward(ctx, x).to_vector();
  std::int64_t kept = 0;
  for (float v : y) kept += v != 0.0f;
  // 262144 draws: the standard deviation of the fraction is 0.0009; allow five of them.
  EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(y.size()), 0.7, 0.0045);
}

TEST(Dropout, EvalModeIsTheIdentity) {
  Drop d(kLeafInit);
  Tensor x = random_input(3, 64, 4);
  Context ctx = train_context(1, 0, 0);
  ctx.mode = Mode::Eval;
  EXPECT_EQ(d.forward(ctx, x).to_vector(), x.to_vector());
  Tensor dy = random_input(3, 64, 5);
  EXPECT_EQ(d.vjp(ctx, dy, InputGrad::Compute).to_vector(), dy.to_vector());
}

TEST(Dropout, BackwardAppliesTheForwardMask) {
  Drop d(kLeafInit);
  Tensor x = random_input(6, 64, 6, 0.5f, 1.5f);
  Context ctx = train_context(9, 2, 17);
  const std::vector<float> y = d.forward(ctx, x).to_vector();
  Tensor dy = random_input(6, 64, 7, 0.5f, 1.5f);
  const std::vector<float> dys = dy.to_vector();
  const std::vector<float> dx = d.vjp(ctx, dy, InputGrad::Compute).to_vector();
  for (std::size_t i = 0; i < dx.size(); ++i) {
    if (y[i] == 0.0f) {
      EXPECT_EQ(dx[i], 0.0f) << i;
    } else {
      EXPECT_FLOAT_EQ(dx[i], dys[i] / 0.7f) << i;
    }
  }
  EXPECT_FALSE(d.vjp(ctx, dy, InputGrad::Skip).defined());
}

TEST(Dropout, GradientsMatchFiniteDifferences) {
  for (std::int64_t rows : testing::test_row_counts(41)) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    Dropout<13, 250> d(kLeafInit);
    gradcheck(d, random_input(rows, 13, 42 + static_cast<std::uint32_t>(rows)));
  }
}

TEST(Dropout, KeepRuleKeepsEverythingAtPZero) {
  const DropoutKey key{123, 4, 5};
  for (std::int64_t r = 0; r < 16; ++r) {
    for (std::int64_t c = 0; c < 16; ++c) EXPECT_TRUE(dropout_keep(key, 0.0f, r, c, 16));
  }
  EXPECT_EQ(dropout_scale(0.0f), 1.0f);
}

}  // namespace
}  // namespace noeira
