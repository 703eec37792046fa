// Writes BatchNorm cases (weights, inputs, outputs, every gradient and the running estimates, in
// training and in evaluation) to one file, which tests/batchnorm_torch_check.py recomputes with
// torch.nn.functional.batch_norm and compares (ctest: tests/batchnorm_torch.cmake).
// The path is $NOEIRA_BATCHNORM_CASES; without it the test writes a scratch file and removes it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "leaf_util.hpp"
#include "nn/batchnorm.hpp"
#include "torch_case_file.hpp"

namespace noeira {
namespace {

using testing::CaseFile;
using testing::random_input;

void add_buffers(CaseFile& file, const std::string& prefix, auto& m) {
  for_each_buffer(m, [&](const std::string& name, Tensor& t) {
    file.add(prefix + "/buffer/" + name, t);
  });
}

// Two training steps (the second sees running estimates that moved), then one evaluation.
template <class M>
void batchnorm_case(CaseFile& file, const std::string& name, std::int64_t rows,
                    std::uint32_t seed) {
  M m(testing::kLeafInit);
  testing::randomize_params(m, seed);
  Context ctx = Context::for_target(Target::Cpu);
  for (int step = 0; step < 2; ++step) {
    const std::string at = name + "/step" + std::to_string(step);
    const Tensor x = random_input(rows, M::in_dim, seed + 10 * step + 1, -2.0f, 4.0f);
    const Tensor dy = random_input(rows, M::in_dim, seed + 10 * step + 2);
    add_buffers(file, at + "/before", m);
    file.add(at + "/x", x);
    file.add(at + "/dy", dy);
    file.add(at + "/y", m.forward(ctx, x));
    file.add(at + "/dx", m.vjp(ctx, dy, InputGrad::Compute));
    file.add_params(at, m);
    add_buffers(file, at + "/after", m);
  }
  ctx.mode = Mode::Eval;
  const Tensor x = random_input(rows, M::in_dim, seed + 99, -2.0f, 4.0f);
  file.add(name + "/eval/x", x);
  file.add(name + "/eval/y", m.forward(ctx, x));
  file.add_case({{"name", name}, {"steps", 2}});
}

TEST(BatchNormTorch, WritesTheCases) {
  CaseFile file;
  batchnorm_case<BatchNorm2D<ImageShape{3, 5, 4}>>(file, "batchnorm2d", 4, 1);
  batchnorm_case<BatchNorm2D<ImageShape{6, 1, 1}>>(file, "batchnorm2d_one_pixel", 7, 2);
  batchnorm_case<BatchNorm1D<9>>(file, "batchnorm1d", 5, 3);
  file.write_where_asked("NOEIRA_BATCHNORM_CASES", "noeira_batchnorm_cases");
}

}  // namespace
}  // namespace noeira
