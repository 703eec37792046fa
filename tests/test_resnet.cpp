// ResNets: BasicBlocks (identity and projected shortcut) against finite differences, torchvision's
// names and parameter count for resnet18, and the shapes of the CIFAR ResNets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "leaf_util.hpp"
#include "nn/resnet.hpp"

namespace noeira {
namespace {

template <class M>
void check_block(std::uint32_t seed, std::int64_t rows) {
  M m(testing::kLeafInit);
  testing::randomize_params(m, seed);
  // A smaller step than the leaves': after BatchNorm many ReLU inputs lie near their kink, and a
  // step across it is not a derivative. (resnet_torch_check compares a whole resnet20 step.)
  testing::GradCheckOptions o;
  o.eps = 1e-3f;
  o.atol = 1e-2;
  o.max_checked_per_tensor = 16;
  testing::gradcheck(m, testing::random_input(rows, M::in_dim, seed, -1.0f, 1.0f), o, seed);
}

TEST(ResNet, BasicBlocksMatchFiniteDifferences) {
  check_block<BasicBlock<ImageShape{3, 5, 5}, 3, 1>>(1, 3);  // identity shortcut
  check_block<BasicBlock<ImageShape{2, 5, 6}, 4, 2>>(2, 2);  // projected: stride and width
  check_block<BasicBlock<ImageShape{2, 4, 4}, 3, 1>>(3, 2);  // projected: width only
}

TEST(ResNet, Resnet18HasTorchvisionsNamesAndParameterCount) {
  using Net = ResNet18<ImageShape{3, 64, 64}, 1000, ResNetStem::ImageNet>;
  Net m(Init(Target::Cpu, InitSpec{}));
  // torchvision.models.resnet18(): 11,689,512 parameters.
  EXPECT_EQ(parameter_count(m), 11689512);
  std::vector<std::string> names;
  for_each_param(m, [&](const std::string& name, Param&) { names.push_back(name); });
  ASSERT_EQ(names.size(), 62u);
  EXPECT_EQ(names.front(), "conv1.weight");
  EXPECT_EQ(names[1], "bn1.weight");
  EXPECT_EQ(names[3], "layer1.0.conv1.weight");
  EXPECT_NE(std::find(names.begin(), names.end(), "layer2.0.downsample.0.weight"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "layer4.1.bn2.bias"), names.end());
  EXPECT_EQ(names.back(), "fc.bias");
  std::vector<std::string> buffers;
  for_each_buffer(m, [&](const std::string& name, Tensor&) { buffers.push_back(name); });
  EXPECT_EQ(buffers.size(), 60u);  // 20 BatchNorms × (running_mean, running_var, count)
  EXPECT_EQ(buffers.front(), "bn1.running_mean");
  EXPECT_EQ(buffers.back(), "layer4.1.bn2.num_batches_tracked");
  // The ImageNet stem halves twice: 64 → 32 → 16, then the stages 16 → 8 → 4 → 2.
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor& y = m.forward(ctx, testing::random_input(1, Net::in_dim, 3));
  EXPECT_EQ(y.shape(), (Shape{1, 1000}));
}

TEST(ResNet, CifarResnetsChainTheirStages) {
  using R20 = ResNetCifar<ImageShape{1, 28, 28}, 3, 10>;
  R20 m(Init(Target::Cpu, InitSpec{}));
  std::int64_t convs = 0;
  for_each_param(m, [&](const std::string& name, Param&) {
    if (name.ends_with("conv1.weight") || name.ends_with("conv2.weight")) ++convs;
  });
  EXPECT_EQ(convs, 19);  // the stem and 2 per block; + fc = resnet20's 20 layers
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor& y = m.forward(ctx, testing::random_input(2, R20::in_dim, 4));
  EXPECT_EQ(y.shape(), (Shape{2, 10}));
}

}  // namespace
}  // namespace noeira
