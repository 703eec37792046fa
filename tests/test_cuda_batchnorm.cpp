// BatchNorm's CUDA kernels against the CPU reference (tests/cuda_compare.hpp), through the leaf:
// two training steps (statistics, running estimates, every gradient) and an evaluation, for
// images and for rows of features. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <string>

#include "cuda_compare.hpp"
#include "gpu_skip.hpp"
#include "nn/batchnorm.hpp"

namespace noeira {
namespace {

using testing::expect_same_on_both;
using testing::random_on;

template <class M>
testing::Outputs run_batchnorm(Target t, std::int64_t rows) {
  M m(Init(t, InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, 3}));
  Context ctx = Context::for_target(t);
  testing::Outputs out;
  for_each_param(m, [&](const std::string&, Param& p) {
    p.val.copy_from(testing::random_values(static_cast<std::size_t>(p.numel()), 5, 0.5f, 1.5f));
  });
  for (int step = 0; step < 2; ++step) {
    const Tensor x = random_on(t, {rows, M::in_dim}, 10 + step, -2.0f, 4.0f);
    const Tensor dy = random_on(t, {rows, M::in_dim}, 20 + step);
    out.push_back({"y", m.forward(ctx, x).to_vector()});
    out.push_back({"dx", m.vjp(ctx, dy, InputGrad::Compute).to_vector()});
    for_each_param(m, [&](const std::string& name, Param& p) {
      out.push_back({"grad " + name, p.grd.to_vector()});
    });
    for_each_buffer(m, [&](const std::string& name, Tensor& b) {
      out.push_back({name, b.to_vector()});
    });
  }
  ctx.mode = Mode::Eval;
  out.push_back({"eval y", m.forward(ctx, random_on(t, {rows, M::in_dim}, 30)).to_vector()});
  return out;
}

TEST(CudaVsCpu, BatchNormTrainingAndEvaluation) {
  NOEIRA_REQUIRE_GPU();
  expect_same_on_both(
      [](Target t) { return run_batchnorm<BatchNorm2D<ImageShape{8, 7, 9}>>(t, 33); },
      testing::kReduction);
  expect_same_on_both([](Target t) { return run_batchnorm<BatchNorm1D<300>>(t, 17); },
                      testing::kReduction);
}

}  // namespace
}  // namespace noeira
