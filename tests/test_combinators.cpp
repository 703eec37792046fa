#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gradcheck.hpp"
#include "nn/linear.hpp"
#include "nn/parallel.hpp"
#include "nn/repeat.hpp"
#include "nn/residual.hpp"
#include "nn/sequential.hpp"

namespace noeira {
namespace {

using testing::gradcheck;
using testing::random_values;

Tensor random_input(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  const auto n = static_cast<std::size_t>(rows * cols);
  return Tensor::from_host({rows, cols}, random_values(n, seed));
}

const Init kInit(Target::Cpu, InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, 42});

template <Module M>
std::vector<std::string> walk_names(M& m) {
  std::vector<std::string> names;
  for_each_param(m, [&](const std::string& name, Param&) { names.push_back(name); });
  return names;
}

template <Module M>
std::vector<std::vector<float>> walk_values(M& m) {
  std::vector<std::vector<float>> values;
  for_each_param(m, [&](const std::string&, Param& p) { values.push_back(p.val.to_vector()); });
  return values;
}

template <Module M>
void check_gradients(std::int64_t rows, std::uint32_t seed) {
  M m(kInit);
  gradcheck(m, random_input(rows, M::in_dim, seed));
}

// --- Residual --------------------------------------------------------------------------------

TEST(Residual, ForwardAddsTheInput) {
  Residual<Linear<3, 3>> res(kInit);
  // W = I, b = 1: y = x + (x + 1) = 2x + 1.
  for_each_param(res, [&](const std::string& name, Param& p) {
    if (name == "weight") p.val.copy_from(std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1});
    else p.val.copy_from(std::vector<float>{1, 1, 1});
  });
  Context ctx = Context::for_target(Target::Cpu);
  Tensor x = Tensor::from_host({2, 3}, std::vector<float>{1, 2, 3, -1, 0, 0.5f});
  EXPECT_EQ(res.forward(ctx, x).to_vector(), (std::vector<float>{3, 5, 7, -1, 1, 2}));
}

TEST(Residual, GradientsMatchFiniteDifferences) {
  check_gradients<Residual<LinearTanh<5, 5>>>(3, 1);
  check_gradients<Residual<Linear<7, 7>>>(1, 2);  // batch of one, odd width
  check_gradients<Residual<Sequential<LinearTanh<5, 9>, Linear<9, 5>>>>(5, 3);
}

TEST(Residual, ChildIsTransparentInTheWalk) {
  Residual<Sequential<Linear<4, 6>, Linear<6, 4>>> res(kInit);
  EXPECT_EQ(walk_names(res),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
  // Same path, same init stream: wrapping in a Residual does not change the initial values.
  Sequential<Linear<4, 6>, Linear<6, 4>> plain(kInit);
  EXPECT_EQ(walk_values(res), walk_values(plain));
}

TEST(Residual, SkipStillWritesParameterGradients) {
  Residual<LinearTanh<4, 4>> a(kInit);
  Residual<LinearTanh<4, 4>> b(kInit);
  Context ctx = Context::for_target(Target::Cpu);
  Tensor x = random_input(3, 4, 5);
  Tensor dy = random_input(3, 4, 6);
  a.forward(ctx, x);
  b.forward(ctx, x);
  EXPECT_TRUE(a.vjp(ctx, dy, InputGrad::Compute).defined());
  EXPECT_FALSE(b.vjp(ctx, dy, InputGrad::Skip).defined());
  std::vector<std::vector<float>> ga, gb;
  for_each_param(a, [&](const std::string&, Param& p) { ga.push_back(p.grd.to_vector()); });
  for_each_param(b, [&](const std::string&, Param& p) { gb.push_back(p.grd.to_vector()); });
  EXPECT_EQ(ga, gb);
  EXPECT_NE(ga.at(0), std::vector<float>(ga.at(0).size(), 0.0f));
}

// --- Parallel --------------------------------------------------------------------------------

TEST(Parallel, ConcatenatesChildOutputsInOrder) {
  using P = Parallel<Linear<2, 1>, Linear<2, 2>>;
  static_assert(P::in_dim == 2 && P::out_dim == 3);
  P par(kInit);
  for_each_param(par, [&](const std::string& name, Param& p) {
    if (name == "0.weight") p.val.copy_from(std::vector<float>{1, 1});          // sum
    if (name == "1.weight") p.val.copy_from(std::vector<float>{1, 0, 0, -1});   // (a, -b)
    if (name == "1.bias") p.val.copy_from(std::vector<float>{10, 20});
  });
  Context ctx = Context::for_target(Target::Cpu);
  Tensor x = Tensor::from_host({2, 2}, std::vector<float>{1, 2, 3, 4});
  EXPECT_EQ(par.forward(ctx, x).to_vector(), (std::vector<float>{3, 11, 18, 7, 13, 16}));
}

TEST(Parallel, GradientsMatchFiniteDifferences) {
  check_gradients<Parallel<LinearTanh<4, 3>, LinearSigmoid<4, 2>, Linear<4, 1>>>(3, 4);
  check_gradients<Parallel<Linear<5, 3>>>(1, 5);  // a single child, batch of one
  check_gradients<Parallel<LinearTanh<3, 7>, Linear<3, 5>>>(7, 6);
}

TEST(Parallel, ChildrenAreNamedByIndex) {
  Parallel<Linear<3, 2>, Linear<3, 4>> par(kInit);
  EXPECT_EQ(walk_names(par),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
}

TEST(Parallel, SkipReturnsUndefinedInputGradient) {
  Parallel<LinearTanh<3, 2>, Linear<3, 4>> par(kInit);
  Context ctx = Context::for_target(Target::Cpu);
  Tensor x = random_input(2, 3, 7);
  par.forward(ctx, x);
  Tensor dy = random_input(2, 6, 8);
  EXPECT_FALSE(par.vjp(ctx, dy, InputGrad::Skip).defined());
}

// --- Repeat ----------------------------------------------------------------------------------

TEST(Repeat, GradientsMatchFiniteDifferences) {
  check_gradients<Repeat<3, LinearTanh<4, 4>>>(3, 9);
  check_gradients<Repeat<1, Linear<5, 5>>>(1, 10);
  check_gradients<Repeat<2, Residual<LinearTanh<7, 7>>>>(5, 11);
}

TEST(Repeat, CopiesAreNamedByIndexAndIndependent) {
  Repeat<3, Linear<4, 4>> rep(kInit);
  EXPECT_EQ(walk_names(rep),
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "2.weight",
                                      "2.bias"}));
  std::vector<std::vector<float>> weights;
  for_each_param(rep, [&](const std::string& name, Param& p) {
    if (name.ends_with("weight")) weights.push_back(p.val.to_vector());
  });
  ASSERT_EQ(weights.size(), 3u);
  EXPECT_NE(weights[0], weights[1]);
  EXPECT_NE(weights[1], weights[2]);
  EXPECT_NE(weights[0], weights[2]);
  // Separate storage too: writing one copy leaves the others alone.
  for_each_param(rep, [&](const std::string& name, Param& p) {
    if (name == "1.weight") p.val.zero();
  });
  std::vector<float> w0;
  for_each_param(rep, [&](const std::string& name, Param& p) {
    if (name == "0.weight") w0 = p.val.to_vector();
  });
  EXPECT_EQ(w0, weights[0]);
}

TEST(Repeat, MatchesTheEquivalentSequential) {
  // Same paths ("0", "1"), same init streams: Repeat<2, M> is Sequential<M, M> exactly.
  Repeat<2, LinearTanh<4, 4>> rep(kInit);
  Sequential<LinearTanh<4, 4>, LinearTanh<4, 4>> seq(kInit);
  Context ctx = Context::for_target(Target::Cpu);
  Tensor x = random_input(3, 4, 12);
  EXPECT_EQ(rep.forward(ctx, x).to_vector(), seq.forward(ctx, x).to_vector());
}

// --- nesting ---------------------------------------------------------------------------------

using Nested = Sequential<Linear<5, 6>, Residual<Sequential<LinearTanh<6, 8>, Linear<8, 6>>>,
                          Parallel<LinearTanh<6, 3>, LinearSigmoid<6, 4>>,
                          Repeat<2, Residual<LinearTanh<7, 7>>>>;

TEST(Nested, GradientsMatchFiniteDifferences) {
  check_gradients<Nested>(1, 13);
  check_gradients<Nested>(3, 14);
}

TEST(Nested, WalkNamesAndOrder) {
  Nested net(kInit);
  EXPECT_EQ(walk_names(net),
            (std::vector<std::string>{"0.weight", "0.bias",                      //
                                      "1.0.weight", "1.0.bias", "1.1.weight", "1.1.bias",
                                      "2.0.weight", "2.0.bias", "2.1.weight", "2.1.bias",
                                      "3.0.weight", "3.0.bias", "3.1.weight", "3.1.bias"}));
}

TEST(Nested, AccumulateModeAddsToParameterGradients) {
  Nested net(kInit);
  Context ctx = Context::for_target(Target::Cpu);
  Tensor x = random_input(3, 5, 15);
  Tensor dy = random_input(3, 7, 16);
  net.forward(ctx, x);
  net.vjp(ctx, dy, InputGrad::Skip);
  std::vector<std::vector<float>> once;
  for_each_param(net, [&](const std::string&, Param& p) { once.push_back(p.grd.to_vector()); });
  ctx.grad_mode = GradMode::Accumulate;
  net.forward(ctx, x);
  net.vjp(ctx, dy, InputGrad::Skip);
  std::size_t i = 0;
  for_each_param(net, [&](const std::string& name, Param& p) {
    const std::vector<float> twice = p.grd.to_vector();
    // BLAS may add the second product into the accumulator term by term, so allow rounding at
    // the scale of the tensor's largest gradient.
    float scale = 0.0f;
    for (float g : once[i]) scale = std::max(scale, std::abs(g));
    ASSERT_GT(scale, 0.0f) << name;
    for (std::size_t j = 0; j < twice.size(); ++j) {
      EXPECT_NEAR(twice[j], 2.0f * once[i][j], 1e-5f * scale) << name << "[" << j << "]";
    }
    ++i;
  });
}

}  // namespace
}  // namespace noeira
