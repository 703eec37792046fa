// Writes one training step of resnet20 (on 12×12 images, so that it is quick) to a file that
// tests/resnet_torch_check.py recomputes in PyTorch (ctest: tests/resnet_torch.cmake): the
// input, every parameter and buffer before the step, the logits, the loss, every gradient and
// the buffers after. The path is $NOEIRA_RESNET_CASES; without it a scratch file is written and
// removed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "leaf_util.hpp"
#include "loss/cross_entropy.hpp"
#include "nn/resnet.hpp"
#include "torch_case_file.hpp"

namespace noeira {
namespace {

constexpr ImageShape kImage{2, 12, 12};
using Net = ResNetCifar<kImage, 3, 10>;

TEST(ResNetTorch, WritesTheCase) {
  Net m(Init(Target::Cpu, InitSpec{InitKind::KaimingNormal, 0.0f, 0.02f, 17}));
  // BatchNorm scales and shifts away from 1 and 0, so that their role is checked too.
  std::uint32_t seed = 100;
  for_each_param(m, [&](const std::string& name, Param& p) {
    if (name.find("bn") != std::string::npos || name.find("downsample.1") != std::string::npos) {
      p.val.copy_from(testing::random_values(static_cast<std::size_t>(p.numel()), seed++, 0.5f,
                                             1.5f));
    }
  });
  testing::CaseFile file;
  for_each_buffer(m, [&](const std::string& name, Tensor& b) { file.add("before/" + name, b); });
  for_each_param(m, [&](const std::string& name, Param& p) { file.add("param/" + name, p.val); });
  const std::int64_t rows = 4;
  const Tensor x = testing::random_input(rows, Net::in_dim, 5, -2.0f, 2.0f);
  const std::vector<std::int32_t> labels = {3, 0, 9, 3};
  const Tensor label_tensor = Tensor::from_host_ids({rows}, labels);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor& logits = m.forward(ctx, x);
  CrossEntropyLoss loss;
  const double loss_sum =
      loss.forward_backward(ctx, logits, label_tensor, 1.0f / static_cast<float>(rows));
  m.vjp(ctx, loss.grad(), InputGrad::Skip);
  file.add("x", x);
  file.add("logits", logits);
  file.add("loss", Tensor::from_host({1}, std::vector<float>{static_cast<float>(loss_sum / rows)}));
  for_each_param(m, [&](const std::string& name, Param& p) { file.add("grad/" + name, p.grd); });
  for_each_buffer(m, [&](const std::string& name, Tensor& b) { file.add("after/" + name, b); });
  file.add_case({{"channels", kImage.channels},
                 {"size", kImage.height},
                 {"blocks", 3},
                 {"classes", 10},
                 {"labels", labels}});
  file.write_where_asked("NOEIRA_RESNET_CASES", "noeira_resnet_cases");
}

}  // namespace
}  // namespace noeira
