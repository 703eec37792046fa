// Writes inputs, outputs and input gradients of every activation leaf to one file, which
// tests/activation_torch_check.py recomputes with torch.nn.functional in float64 and compares
// (ctest: tests/activation_torch.cmake). The file's format: tests/torch_case_file.hpp; its path
// is $NOEIRA_ACTIVATION_CASES (without it the test writes a scratch file and removes it).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "leaf_util.hpp"
#include "nn/activation.hpp"
#include "torch_case_file.hpp"

namespace noeira {
namespace {

// Runs the leaf forward and back on [rows, D] inputs in [lo, hi] and records x, dy, y and dx
// under the activation's name. The ranges reach the saturated tails and the branches of each
// formula (Mish's gate and Softplus above 20, HardSwish's flat parts beyond ±3).
template <class M>
void activation_case(testing::CaseFile& file, std::int64_t rows, std::uint32_t seed, float lo,
                     float hi) {
  M m(testing::kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = Tensor::from_host(
      {rows, M::in_dim},
      testing::random_values(static_cast<std::size_t>(rows * M::in_dim), seed, lo, hi));
  const Tensor& y = m.forward(ctx, x);
  const Tensor dy = Tensor::from_host(
      y.shape(), testing::random_values(static_cast<std::size_t>(y.numel()), seed + 1));
  const std::string name(to_string(M::activation));
  file.add(name + "/x", x);
  file.add(name + "/dy", dy);
  file.add(name + "/y", y);
  file.add(name + "/dx", m.vjp(ctx, dy, InputGrad::Compute));
  file.add_case({{"name", name}});
}

TEST(ActivationTorch, WritesTheCases) {
  testing::CaseFile file;
  activation_case<ReLU<12>>(file, 5, 1, -2.0f, 2.0f);
  activation_case<Tanh<12>>(file, 5, 2, -4.0f, 4.0f);
  activation_case<Sigmoid<12>>(file, 5, 3, -8.0f, 8.0f);
  activation_case<GELU<12>>(file, 5, 4, -6.0f, 6.0f);
  activation_case<GELUExact<12>>(file, 5, 5, -6.0f, 6.0f);
  activation_case<SiLU<12>>(file, 5, 6, -8.0f, 8.0f);
  activation_case<ELU<12>>(file, 5, 7, -6.0f, 3.0f);
  activation_case<HardSwish<12>>(file, 5, 8, -5.0f, 5.0f);
  activation_case<Mish<12>>(file, 5, 9, -25.0f, 25.0f);
  activation_case<Softplus<12>>(file, 5, 10, -30.0f, 30.0f);
  file.write_where_asked("NOEIRA_ACTIVATION_CASES", "noeira_activation_cases");
}

}  // namespace
}  // namespace noeira
