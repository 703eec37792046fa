#include <gtest/gtest.h>

#include "gradcheck.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"

namespace noeira {
namespace {

using testing::gradcheck;
using testing::random_values;

Tensor random_input(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  return Tensor::from_host({rows, cols}, random_values(static_cast<std::size_t>(rows * cols), seed));
}

const Init kInit(Target::Cpu, InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, 42});

TEST(Linear, ForwardMatchesClosedForm) {
  Linear<3, 2> lin(kInit);
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  std::vector<float> b = {0.5f, -1.0f};
  for_each_param(lin, [&](const std::string& name, Param& p) {
    p.val.copy_from(name == "weight" ? w : b);
  });
  Context ctx = Context::for_target(Target::Cpu);
  Tensor x = Tensor::from_host({2, 3}, std::vector<float>{1, 0, -1, 2, 1, 0});
  const std::vector<float> y = lin.forward(ctx, x).to_vector();
  // row 0: [1-3+0.5, 4-6-1] ; row 1: [2+2+0.5, 8+5-1]
  EXPECT_EQ(y, (std::vector<float>{-1.5f, -3.0f, 4.5f, 12.0f}));
}

template <class M>
void check_family_member(std::int64_t rows) {
  M m(kInit);
  gradcheck(m, random_input(rows, M::in_dim, 11 + static_cast<std::uint32_t>(rows)));
}

TEST(Linear, GradientsMatchFiniteDifferences) {
  check_family_member<Linear<5, 3>>(4);
  check_family_member<Linear<7, 1>>(1);  // batch of one, odd sizes
}

TEST(LinearAct, EveryActivationMatchesFiniteDifferences) {
  check_family_member<LinearTanh<6, 5>>(3);
  check_family_member<LinearSigmoid<6, 5>>(3);
  check_family_member<LinearGELU<6, 5>>(3);
  check_family_member<LinearAct<6, 5, Activation::GeluErf>>(3);
  check_family_member<LinearSiLU<6, 5>>(1);
  // ReLU's kink: the finite difference is wrong within eps of 0, so use a small eps.
  LinearReLU<6, 5> relu(kInit);
  testing::GradCheckOptions o;
  o.eps = 1e-3f;
  o.atol = 2e-2;
  gradcheck(relu, random_input(3, 6, 5), o);
}

TEST(Linear, SkippedInputGradientIsUndefined) {
  Linear<4, 2> lin(kInit);
  Context ctx = Context::for_target(Target::Cpu);
  Tensor x = random_input(3, 4, 1);
  lin.forward(ctx, x);
  Tensor dy = random_input(3, 2, 2);
  EXPECT_FALSE(lin.vjp(ctx, dy, InputGrad::Skip).defined());
}

TEST(Linear, RejectsInputOfWrongWidth) {
  Linear<4, 2> lin(kInit);
  Context ctx = Context::for_target(Target::Cpu);
  Tensor x = random_input(3, 5, 1);
  EXPECT_THROW(lin.forward(ctx, x), InputError);
}

TEST(Linear, RejectsAnInputOnAnotherTargetThanTheContext) {
  Linear<4, 2> lin(kInit);
  // A context that claims the GPU, with the CPU's kernels: the check must fire before any kernel.
  Context ctx = Context::for_target(Target::Cpu);
  ctx.target = Target::Cuda;
  Tensor x = random_input(3, 4, 1);
  try {
    lin.forward(ctx, x);
    ADD_FAILURE() << "a host input ran in a cuda context";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("on cpu but the context runs on cuda"), std::string::npos)
        << e.what();
  }
}

TEST(Sequential, ChainsAndMatchesFiniteDifferences) {
  Sequential<LinearTanh<5, 4>, LinearGELU<4, 6>, Linear<6, 3>> net(kInit);
  testing::GradCheckOptions o;
  gradcheck(net, random_input(2, 5, 3), o);
}

TEST(Sequential, WalkNamesFollowChildIndices) {
  Sequential<Linear<5, 4>, Sequential<Linear<4, 4>, Linear<4, 2>>> net(kInit);
  std::vector<std::string> names;
  for_each_param(net, [&](const std::string& name, Param&) { names.push_back(name); });
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.0.weight", "1.0.bias",
                                              "1.1.weight", "1.1.bias"}));
}

}  // namespace
}  // namespace noeira
