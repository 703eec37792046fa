// Initializers: the random ones depend on the seed and the parameter's name only and have the
// spread they promise; the Deterministic one is its formula, whatever the seed and name.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/init.hpp"
#include "nn/linear.hpp"

namespace noeira {
namespace {

double mean_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / static_cast<double>(v.size());
}

double std_of(const std::vector<float>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

std::vector<float> weight(InitKind kind, std::uint64_t seed, const char* name,
                          std::int64_t fan_in = 400, std::int64_t fan_out = 100) {
  const Init init(Target::Cpu, InitSpec{kind, 0.0f, 0.02f, seed});
  return init.weight(name, {fan_out, fan_in}, fan_in, fan_out).val.to_vector();
}

TEST(Init, RandomKindsHaveTheirSpread) {
  // 40000 draws: the sample standard deviation is within 2% of the true one.
  EXPECT_NEAR(std_of(weight(InitKind::KaimingNormal, 1, "w")), std::sqrt(2.0 / 400),
              0.02 * 0.0707);
  EXPECT_NEAR(std_of(weight(InitKind::KaimingUniform, 1, "w")), std::sqrt(2.0 / 400),
              0.02 * 0.0707);
  EXPECT_NEAR(std_of(weight(InitKind::XavierNormal, 1, "w")), std::sqrt(2.0 / 500),
              0.02 * 0.0632);
  EXPECT_NEAR(std_of(weight(InitKind::XavierUniform, 1, "w")), std::sqrt(2.0 / 500),
              0.02 * 0.0632);
  EXPECT_NEAR(std_of(weight(InitKind::Normal, 1, "w")), 0.02, 0.02 * 0.02);
  for (float x : weight(InitKind::KaimingUniform, 3, "w")) {
    ASSERT_LE(std::fabs(x), std::sqrt(6.0f / 400.0f));
  }
  for (float x : weight(InitKind::Zero, 3, "w")) ASSERT_EQ(x, 0.0f);
}

TEST(Init, RandomKindsDependOnTheSeedAndTheNameOnly) {
  EXPECT_EQ(weight(InitKind::KaimingNormal, 5, "w"), weight(InitKind::KaimingNormal, 5, "w"));
  EXPECT_NE(weight(InitKind::KaimingNormal, 5, "w"), weight(InitKind::KaimingNormal, 6, "w"));
  EXPECT_NE(weight(InitKind::KaimingNormal, 5, "w"), weight(InitKind::KaimingNormal, 5, "v"));
}

TEST(Init, DeterministicIsItsFormula) {
  const std::vector<float> w = weight(InitKind::Deterministic, 5, "w", 3, 2);
  ASSERT_EQ(w.size(), 6u);
  for (std::size_t i = 0; i < w.size(); ++i) {
    EXPECT_FLOAT_EQ(w[i], std::sqrt(3.0f / 3.0f) * static_cast<float>(std::sin(i + 1.0))) << i;
  }
  EXPECT_EQ(w, weight(InitKind::Deterministic, 6, "other", 3, 2));
  // Its spread stands for Kaiming-uniform's: mean sin² is 1/2, so the variance is 1.5 / fan_in.
  EXPECT_NEAR(std_of(weight(InitKind::Deterministic, 1, "w")), std::sqrt(1.5 / 400), 1e-4);

  const Init init(Target::Cpu, InitSpec{InitKind::Deterministic, 0.0f, 0.02f, 1});
  const std::vector<float> e = init.normal("table", {2, 2}, 1.0f, 0.5f).val.to_vector();
  for (std::size_t i = 0; i < e.size(); ++i) {
    EXPECT_FLOAT_EQ(e[i], 1.0f + 0.5f * std::sqrt(2.0f) * static_cast<float>(std::sin(i + 1.0)));
  }
  // A layer built with it computes what the formula's weights compute.
  Linear<3, 2> layer(init);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = Tensor::from_host({1, 3}, std::vector<float>{1.0f, -2.0f, 0.5f});
  const std::vector<float> y = layer.forward(ctx, x).to_vector();
  for (int o = 0; o < 2; ++o) {
    double want = 0;  // the bias is 0
    for (int i = 0; i < 3; ++i) want += std::sin(o * 3 + i + 1.0) * x.to_vector()[i];
    EXPECT_NEAR(y[o], want, 1e-6) << o;
  }
}

}  // namespace
}  // namespace noeira
