// The feed-forward blocks (FeedForwardGELU, SwiGLU and its GatedProduct gate) on sequence inputs:
// the gate's closed form, finite differences for every parameter and the input, and the same
// results on the GPU as on the CPU (skipped without one).
#include <gtest/gtest.h>

#include <vector>

#include "cuda_compare.hpp"
#include "gpu_skip.hpp"
#include "leaf_util.hpp"
#include "nn/feed_forward.hpp"

namespace noeira {
namespace {

using testing::kLeafInit;
using testing::random_values;

TEST(FeedForward, GatedProductMultipliesTheTwoHalves) {
  Context ctx = Context::for_target(Target::Cpu);
  GatedProduct<2> gate(kLeafInit);
  const Tensor x = Tensor::from_host({1, 2, 4}, std::vector<float>{1, 2, 3, 4, -1, 0.5f, 2, -2});
  EXPECT_EQ(gate.forward(ctx, x).to_vector(), (std::vector<float>{3, 8, -2, -1}));
  EXPECT_EQ(gate.forward(ctx, x).shape(), (Shape{1, 2, 2}));
  const Tensor dy = Tensor::from_host({1, 2, 2}, std::vector<float>{1, 10, 100, 1000});
  EXPECT_EQ(gate.vjp(ctx, dy, InputGrad::Compute).to_vector(),
            (std::vector<float>{3, 40, 1, 20, 200, -2000, -100, 500}));
}

TEST(FeedForward, GeluBlockMatchesFiniteDifferences) {
  FeedForwardGELU<6, 24> ffn(kLeafInit);
  testing::gradcheck(ffn, Tensor::from_host({1, 3, 6}, random_values(18, 3)));
  testing::gradcheck(ffn, Tensor::from_host({2, 5, 6}, random_values(60, 4)));
}

TEST(FeedForward, SwigluMatchesFiniteDifferences) {
  SwiGLU<6, 10> ffn(kLeafInit);
  testing::gradcheck(ffn, Tensor::from_host({1, 3, 6}, random_values(18, 5)));
  testing::gradcheck(ffn, Tensor::from_host({2, 5, 6}, random_values(60, 6)));
}

TEST(CudaModule, SwigluMatchesTheCpu) {
  NOEIRA_REQUIRE_GPU();
  testing::expect_same_on_both(
      [](Target t) {
        const Init init(t, InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, 42});
        SwiGLU<16, 40> ffn(init);
        Context ctx = Context::for_target(t);
        const Tensor x = testing::random_on(t, {3, 7, 16}, 8);
        const std::vector<float> y = ffn.forward(ctx, x).to_vector();
        const Tensor dy = testing::random_on(t, {3, 7, 16}, 9);
        const std::vector<float> dx = ffn.vjp(ctx, dy, InputGrad::Compute).to_vector();
        testing::Outputs out{{"y", y}, {"dx", dx}};
        for_each_param(ffn, [&](const std::string& name, Param& p) {
          out.emplace_back(name, p.grd.to_vector());
        });
        return out;
      },
      testing::kGemm);
}

}  // namespace
}  // namespace noeira
