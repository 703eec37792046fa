// LSTM and GRU (src/nn/recurrent.hpp) against finite differences through time, alone and
// stacked, for one step, one sequence and odd sizes; gradient accumulation; shape errors. The
// agreement with torch.nn.LSTM / GRU is tests/test_recurrent_torch.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "leaf_util.hpp"
#include "nn/activation.hpp"
#include "nn/linear.hpp"
#include "nn/recurrent.hpp"
#include "nn/sequential.hpp"

namespace noeira {
namespace {

Tensor random_sequences(std::int64_t batch, std::int64_t steps, std::int64_t width,
                        std::uint32_t seed) {
  return Tensor::from_host(
      {batch, steps, width},
      testing::random_values(static_cast<std::size_t>(batch * steps * width), seed));
}

// Every input element and parameter of a layer run over (batch, steps) against central
// differences; the sizes cover one step (no recurrence), one sequence and odd counts.
template <class M>
void check_through_time(std::uint32_t seed) {
  const std::vector<std::pair<std::int64_t, std::int64_t>> sizes = {{1, 1}, {1, 5}, {3, 4}};
  for (const auto& [batch, steps] : sizes) {
    SCOPED_TRACE(::testing::Message() << "batch " << batch << ", steps " << steps);
    M m(testing::kLeafInit);
    testing::GradCheckOptions o;
    o.max_checked_per_tensor = 64;
    testing::gradcheck(m, random_sequences(batch, steps, M::in_dim, seed), o, seed + 1);
  }
}

TEST(Recurrent, LstmMatchesFiniteDifferences) { check_through_time<LSTM<5, 6>>(11); }

TEST(Recurrent, GruMatchesFiniteDifferences) { check_through_time<GRU<5, 6>>(21); }

TEST(Recurrent, StackedLayersMatchFiniteDifferences) {
  using Net = Sequential<LSTM<3, 4>, GRU<4, 5>, Tanh<5>, Linear<5, 2>>;
  Net m(testing::kLeafInit);
  testing::gradcheck(m, random_sequences(2, 6, 3, 31));
}

// The state carries information forward: the last output depends on the first input.
TEST(Recurrent, TheLastStepSeesTheFirstInput) {
  LSTM<2, 3> m(testing::kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  Tensor x = random_sequences(1, 4, 2, 41);
  const std::vector<float> y0 = m.forward(ctx, x).to_vector();
  std::vector<float> v = x.to_vector();
  v[0] += 0.5f;
  x.copy_from(v);
  const std::vector<float> y1 = m.forward(ctx, x).to_vector();
  EXPECT_NE(y0[y0.size() - 1], y1[y1.size() - 1]);
  EXPECT_NE(y0[0], y1[0]);
}

// Under GradMode::Accumulate a second backward adds to the gradients the first wrote (to rounding:
// the bias sums and GEMMs with beta = 1 add in another order).
template <class M>
void check_accumulation() {
  M m(testing::kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = random_sequences(2, 3, M::in_dim, 51);
  const Tensor& y = m.forward(ctx, x);
  const Tensor dy = Tensor::from_host(
      y.shape(), testing::random_values(static_cast<std::size_t>(y.numel()), 52));
  m.vjp(ctx, dy, InputGrad::Skip);
  std::vector<std::vector<float>> once;
  for_each_param(m, [&](const std::string&, Param& p) { once.push_back(p.grd.to_vector()); });
  ctx.grad_mode = GradMode::Accumulate;
  m.vjp(ctx, dy, InputGrad::Skip);
  std::size_t i = 0;
  for_each_param(m, [&](const std::string& name, Param& p) {
    const std::vector<float> twice = p.grd.to_vector();
    for (std::size_t e = 0; e < twice.size(); ++e) {
      ASSERT_NEAR(twice[e], 2.0f * once[i][e], 1e-6 + 1e-5 * std::abs(once[i][e]))
          << name << "[" << e << "]";
    }
    ++i;
  });
}

TEST(Recurrent, LstmAccumulatesGradients) { check_accumulation<LSTM<3, 4>>(); }
TEST(Recurrent, GruAccumulatesGradients) { check_accumulation<GRU<3, 4>>(); }

TEST(Recurrent, NamesItsParametersAsPyTorchDoes) {
  Sequential<LSTM<3, 4>, GRU<4, 2>> m(testing::kLeafInit);
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for_each_param(m, [&](const std::string& name, Param& p) {
    names.push_back(name);
    shapes.push_back(p.shape());
  });
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight_ih", "0.weight_hh", "0.bias_ih",
                                             "0.bias_hh", "1.weight_ih", "1.weight_hh",
                                             "1.bias_ih", "1.bias_hh"}));
  EXPECT_EQ(shapes[0], (Shape{16, 3}));
  EXPECT_EQ(shapes[1], (Shape{16, 4}));
  EXPECT_EQ(shapes[4], (Shape{6, 4}));
  EXPECT_EQ(shapes[7], (Shape{6}));
}

// PyTorch's initializer: every element within ±1/sqrt(hidden), and not all equal.
TEST(Recurrent, DrawsFromPyTorchsRange) {
  GRU<3, 16> m(Init(Target::Cpu, InitSpec{InitKind::KaimingNormal, 0.0f, 0.02f, 7}));
  for_each_param(m, [&](const std::string& name, Param& p) {
    const std::vector<float> v = p.val.to_vector();
    float lo = v[0], hi = v[0];
    for (float e : v) {
      EXPECT_LE(std::abs(e), 0.25f) << name;
      lo = std::min(lo, e);
      hi = std::max(hi, e);
    }
    EXPECT_GT(hi - lo, 0.2f) << name;
  });
}

TEST(Recurrent, RejectsInputsThatAreNotSequences) {
  LSTM<3, 4> m(testing::kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor rows = Tensor::from_host({2, 3}, std::vector<float>(6, 0.0f));
  testing::expect_input_error([&] { m.forward(ctx, rows); }, {"LSTM: expected the input"});
  const Tensor wide = random_sequences(2, 3, 5, 61);
  testing::expect_input_error([&] { m.forward(ctx, wide); }, {"LSTM", "[batch, seq, 3]"});
}

}  // namespace
}  // namespace noeira
