// Normalization leaves: LayerNorm and RMSNorm.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "leaf_util.hpp"
#include "nn/layernorm.hpp"
#include "nn/rmsnorm.hpp"

namespace noeira {
namespace {

using testing::gradcheck;
using testing::kLeafInit;
using testing::random_input;

template <class M>
void check_norm(std::uint32_t seed) {
  for (std::int64_t rows : testing::test_row_counts(seed)) {
    SCOPED_TRACE("D " + std::to_string(M::in_dim) + ", rows " + std::to_string(rows));
    M m(kLeafInit);
    testing::randomize_params(m, seed);
    const std::uint32_t input_seed = seed + static_cast<std::uint32_t>(rows);
    gradcheck(m, random_input(rows, M::in_dim, input_seed, -2.0f, 2.0f), {}, seed);
  }
}

TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  check_norm<LayerNorm<7>>(1);
  check_norm<LayerNorm<3>>(2);
  check_norm<LayerNorm<67>>(3);  // more than one column block for the parameter sums
}

TEST(RMSNorm, GradientsMatchFiniteDifferences) {
  check_norm<RMSNorm<7>>(4);
  check_norm<RMSNorm<3>>(5);  // not 1: y = sign(x)·w there, steeper than eps allows near 0
  check_norm<RMSNorm<67>>(6);
}

TEST(LayerNorm, ParametersStartAtOneAndZeroWithoutDecay) {
  LayerNorm<5> ln(kLeafInit);
  std::vector<std::string> names;
  for_each_param(ln, [&](const std::string& name, Param& p) {
    names.push_back(name);
    EXPECT_EQ(p.decay, Decay::Skip) << name;
    const float want = name == "weight" ? 1.0f : 0.0f;
    for (float v : p.val.to_vector()) EXPECT_EQ(v, want) << name;
  });
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias"}));
}

TEST(LayerNorm, OutputRowsHaveMeanZeroAndVarianceOne) {
  Context ctx = Context::for_target(Target::Cpu);
  LayerNorm<33> ln(kLeafInit);
  Tensor x = random_input(4, 33, 9, -3.0f, 5.0f);
  const std::vector<float> y = ln.forward(ctx, x).to_vector();
  for (int r = 0; r < 4; ++r) {
    double mean = 0.0;
    for (int c = 0; c < 33; ++c) mean += y[r * 33 + c];
    mean /= 33.0;
    double var = 0.0;
    for (int c = 0; c < 33; ++c) var += (y[r * 33 + c] - mean) * (y[r * 33 + c] - mean);
    var /= 33.0;
    EXPECT_NEAR(mean, 0.0, 1e-5) << "row " << r;
    EXPECT_NEAR(var, 1.0, 1e-3) << "row " << r;  // eps = 1e-5 against var of order 1
  }
}

TEST(RMSNorm, OutputRowsHaveUnitRootMeanSquare) {
  Context ctx = Context::for_target(Target::Cpu);
  RMSNorm<33> rms(kLeafInit);
  Tensor x = random_input(4, 33, 10, -3.0f, 5.0f);
  const std::vector<float> xs = x.to_vector();
  const std::vector<float> y = rms.forward(ctx, x).to_vector();
  for (int r = 0; r < 4; ++r) {
    double ms = 0.0;
    for (int c = 0; c < 33; ++c) ms += static_cast<double>(y[r * 33 + c]) * y[r * 33 + c];
    EXPECT_NEAR(ms / 33.0, 1.0, 1e-4) << "row " << r;
    // Direction unchanged: y is a positive multiple of x.
    EXPECT_GT(y[r * 33] * xs[r * 33], 0.0f);
  }
}

// A row small enough that eps decides its scale: LayerNorm's [a, -a] becomes ±a/sqrt(a² + eps),
// RMSNorm's constant a becomes a/sqrt(a² + eps), with the module's own eps.
template <class Norm>
void check_eps(double eps, bool centered) {
  static_assert(Norm::in_dim == 2);
  Context ctx = Context::for_target(Target::Cpu);
  Norm m(kLeafInit);
  const float a = 0.01f;
  const Tensor x = Tensor::from_host({1, 2}, std::vector<float>{a, centered ? -a : a});
  const std::vector<float> y = m.forward(ctx, x).to_vector();
  const double expected = a / std::sqrt(static_cast<double>(a) * a + eps);
  EXPECT_NEAR(y[0], expected, 1e-5 * expected) << "eps " << eps;
  EXPECT_NEAR(y[1], centered ? -expected : expected, 1e-5 * expected) << "eps " << eps;
}

TEST(LayerNorm, AppliesTheEpsOfItsType) {
  check_eps<LayerNorm<2>>(1e-5, true);
  check_eps<LayerNorm<2, 1e-3f>>(1e-3, true);
  check_norm<LayerNorm<7, 1e-2f>>(7);
}

TEST(RMSNorm, AppliesTheEpsOfItsType) {
  check_eps<RMSNorm<2>>(1e-6, false);
  check_eps<RMSNorm<2, 1e-4f>>(1e-4, false);
  check_norm<RMSNorm<7, 1e-4f>>(8);
}

template <class M>
void check_grad_modes() {
  Context ctx = Context::for_target(Target::Cpu);
  M m(kLeafInit);
  testing::randomize_params(m, 3);
  Tensor x = random_input(5, M::in_dim, 1);
  Tensor dy = random_input(5, M::in_dim, 2);
  m.forward(ctx, x);
  m.vjp(ctx, dy, InputGrad::Compute);
  const std::vector<float> once = testing::param_grad(m, "weight");
  m.vjp(ctx, dy, InputGrad::Compute);
  EXPECT_EQ(testing::param_grad(m, "weight"), once) << "Overwrite must not accumulate";
  ctx.grad_mode = GradMode::Accumulate;
  m.vjp(ctx, dy, InputGrad::Skip);
  const std::vector<float> twice = testing::param_grad(m, "weight");
  ASSERT_EQ(twice.size(), once.size());
  for (std::size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(twice[i], 2.0f * once[i]);
  EXPECT_FALSE(m.vjp(ctx, dy, InputGrad::Skip).defined());
}

TEST(LayerNorm, GradModeOverwritesOrAccumulates) { check_grad_modes<LayerNorm<6>>(); }
TEST(RMSNorm, GradModeOverwritesOrAccumulates) { check_grad_modes<RMSNorm<6>>(); }

// The parameter gradients are sums over rows: their order must not follow the thread count.
template <class M>
std::vector<float> weight_grad_with_threads(int threads) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  Context ctx = Context::for_target(Target::Cpu);
  M m(kLeafInit);
  Tensor x = random_input(1031, M::in_dim, 21, -3.0f, 3.0f);  // big enough to run in parallel
  Tensor dy = random_input(1031, M::in_dim, 22);
  m.forward(ctx, x);
  m.vjp(ctx, dy, InputGrad::Compute);
  omp_set_num_threads(before);
  return testing::param_grad(m, "weight");
}

TEST(LayerNorm, GammaGradientIsIdenticalForOneAndTwoThreads) {
  EXPECT_EQ(weight_grad_with_threads<LayerNorm<300>>(1),
            weight_grad_with_threads<LayerNorm<300>>(2));
}

TEST(RMSNorm, GammaGradientIsIdenticalForOneAndTwoThreads) {
  EXPECT_EQ(weight_grad_with_threads<RMSNorm<300>>(1), weight_grad_with_threads<RMSNorm<300>>(2));
}

TEST(LayerNorm, RejectsInputOfWrongWidth) {
  Context ctx = Context::for_target(Target::Cpu);
  LayerNorm<4> ln(kLeafInit);
  Tensor x = random_input(2, 5, 1);
  EXPECT_THROW(ln.forward(ctx, x), InputError);
}

}  // namespace
}  // namespace noeira
