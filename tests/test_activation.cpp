// Element-wise and shape leaves: the activation leaves, Softmax and Flatten.
#include <gtest/gtest.h>

#include <cmath>

#include "leaf_util.hpp"
#include "nn/activation.hpp"
#include "nn/flatten.hpp"
#include "nn/sequential.hpp"
#include "nn/softmax.hpp"

namespace noeira {
namespace {

using testing::gradcheck;
using testing::kLeafInit;
using testing::random_input;

template <class M>
void check_leaf(std::uint32_t seed, const testing::GradCheckOptions& o = {}) {
  for (std::int64_t rows : testing::test_row_counts(seed)) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    M m(kLeafInit);
    const std::uint32_t input_seed = seed + static_cast<std::uint32_t>(rows);
    gradcheck(m, random_input(rows, M::in_dim, input_seed, -2.0f, 2.0f), o, seed);
  }
}

TEST(Activation, SmoothLeavesMatchFiniteDifferences) {
  check_leaf<Tanh<7>>(1);
  check_leaf<Sigmoid<13>>(2);
  check_leaf<GELU<5>>(3);
  check_leaf<GELUExact<9>>(4);
  check_leaf<SiLU<11>>(5);
  check_leaf<Mish<10>>(7);
  check_leaf<Softplus<6>>(8);
}

TEST(Activation, KinkedLeavesMatchFiniteDifferencesAwayFromTheKinks) {
  // ELU's second derivative jumps at 0, HardSwish's slope at ±3: inputs in [-2, 2] (HardSwish
  // also scaled into [-4, 4]) rarely land within eps of them.
  testing::GradCheckOptions o;
  o.eps = 1e-3f;
  o.atol = 2e-2;
  check_leaf<ELU<12>>(8, o);
  check_leaf<HardSwish<14>>(9, o);
  for (std::int64_t rows : {3, 8}) {
    HardSwish<5> m(kLeafInit);
    gradcheck(m, random_input(rows, 5, 40 + static_cast<std::uint32_t>(rows), -4.0f, 4.0f), o,
              10);
  }
}

TEST(Activation, ReLUMatchesFiniteDifferencesAwayFromTheKink) {
  // Central differences straddling 0 are wrong for ReLU; inputs in [-2, 2] with eps 1e-3 almost
  // never land within eps of 0.
  testing::GradCheckOptions o;
  o.eps = 1e-3f;
  o.atol = 2e-2;
  check_leaf<ReLU<15>>(6, o);
}

TEST(Activation, ForwardMatchesClosedForm) {
  Context ctx = Context::for_target(Target::Cpu);
  Tensor x = Tensor::from_host({2, 3}, std::vector<float>{-2.0f, 0.0f, 3.0f, 1.5f, -0.5f, 0.25f});
  ReLU<3> relu(kLeafInit);
  EXPECT_EQ(relu.forward(ctx, x).to_vector(),
            (std::vector<float>{0.0f, 0.0f, 3.0f, 1.5f, 0.0f, 0.25f}));
  Tanh<3> tanh_leaf(kLeafInit);
  Sigmoid<3> sigmoid(kLeafInit);
  GELUExact<3> gelu(kLeafInit);
  SiLU<3> silu(kLeafInit);
  const std::vector<float> xs = x.to_vector();
  const std::vector<float> t = tanh_leaf.forward(ctx, x).to_vector();
  const std::vector<float> s = sigmoid.forward(ctx, x).to_vector();
  const std::vector<float> g = gelu.forward(ctx, x).to_vector();
  const std::vector<float> si = silu.forward(ctx, x).to_vector();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    const double sig = 1.0 / (1.0 + std::exp(-v));
    EXPECT_NEAR(t[i], std::tanh(v), 1e-6);
    EXPECT_NEAR(s[i], sig, 1e-6);
    EXPECT_NEAR(g[i], 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))), 1e-6);
    EXPECT_NEAR(si[i], v * sig, 1e-6);
  }
}

TEST(Activation, KeepsTheInputShapeAndSkipsInputGradient) {
  Context ctx = Context::for_target(Target::Cpu);
  Tensor x(Shape{2, 3, 2, 2});
  ReLU<12> relu(kLeafInit);
  EXPECT_EQ(relu.forward(ctx, x).shape(), (Shape{2, 3, 2, 2}));
  Tensor dy(Shape{2, 3, 2, 2});
  EXPECT_EQ(relu.vjp(ctx, dy, InputGrad::Compute).shape(), (Shape{2, 3, 2, 2}));
  EXPECT_FALSE(relu.vjp(ctx, dy, InputGrad::Skip).defined());
  Tensor wrong = random_input(2, 5, 1);
  EXPECT_THROW(relu.forward(ctx, wrong), InputError);
}

TEST(Softmax, RowsAreProbabilitiesMatchingTheClosedForm) {
  Context ctx = Context::for_target(Target::Cpu);
  Softmax<9> sm(kLeafInit);
  Tensor x = random_input(5, 9, 3, -4.0f, 4.0f);
  const std::vector<float> xs = x.to_vector();
  const std::vector<float> y = sm.forward(ctx, x).to_vector();
  for (int r = 0; r < 5; ++r) {
    double z = 0.0;
    for (int c = 0; c < 9; ++c) z += std::exp(static_cast<double>(xs[r * 9 + c]));
    double total = 0.0;
    for (int c = 0; c < 9; ++c) {
      EXPECT_NEAR(y[r * 9 + c], std::exp(static_cast<double>(xs[r * 9 + c])) / z, 1e-6);
      total += y[r * 9 + c];
    }
    EXPECT_NEAR(total, 1.0, 1e-5) << "row " << r;
  }
}

TEST(Softmax, IsStableForLargeLogits) {
  // Without subtracting the row max, exp(1000) overflows to inf and the row becomes NaN.
  Context ctx = Context::for_target(Target::Cpu);
  Softmax<3> sm(kLeafInit);
  Tensor x = Tensor::from_host({2, 3}, std::vector<float>{1000.0f, 1000.0f, 1000.0f,
                                                            -1000.0f, 0.0f, 1000.0f});
  const std::vector<float> y = sm.forward(ctx, x).to_vector();
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(y[c], 1.0f / 3.0f, 1e-6);
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_EQ(y[4], 0.0f);
  EXPECT_EQ(y[5], 1.0f);
}

TEST(Softmax, GradientsMatchFiniteDifferences) {
  check_leaf<Softmax<7>>(10);
  check_leaf<Softmax<1>>(11);  // a one-element softmax is constant 1: its gradient is 0
  check_leaf<Softmax<70>>(12);
}

TEST(Flatten, IsAViewBothWays) {
  Context ctx = Context::for_target(Target::Cpu);
  Flatten<2, 3, 2> flat(kLeafInit);
  const std::vector<float> values = testing::random_values(24, 5);
  Tensor x = Tensor::from_host({2, 2, 3, 2}, values);
  const Tensor& y = flat.forward(ctx, x);
  EXPECT_EQ(y.shape(), (Shape{2, 12}));
  EXPECT_EQ(y.data(), x.data()) << "Flatten must not copy";
  EXPECT_EQ(y.to_vector(), values);
  Tensor dy = random_input(2, 12, 6);
  const Tensor& dx = flat.vjp(ctx, dy, InputGrad::Compute);
  EXPECT_EQ(dx.shape(), (Shape{2, 2, 3, 2}));
  EXPECT_EQ(dx.data(), dy.data());
  EXPECT_FALSE(flat.vjp(ctx, dy, InputGrad::Skip).defined());
  Tensor wrong(Shape{2, 2, 3, 3});
  EXPECT_THROW(flat.forward(ctx, wrong), InputError);
}

TEST(Flatten, ComposesWithActivationsUnderFiniteDifferences) {
  Sequential<Tanh<12>, Flatten<3, 2, 2>, Softmax<12>> net(kLeafInit);
  Tensor x = Tensor::from_host({3, 3, 2, 2}, testing::random_values(36, 8));
  gradcheck(net, x);
}

}  // namespace
}  // namespace noeira
