// Conv2D and ConvTranspose2D on CUDA (cuDNN) against the CPU reference (oneDNN): the
// same weights and inputs through both targets, every output and gradient compared within
// tests/cuda_compare.hpp's GEMM tolerance, and a repeated step on CUDA compared bit for bit
// (the algorithms are chosen deterministic). Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "conv_util.hpp"
#include "cuda_compare.hpp"
#include "gpu_skip.hpp"
#include "nn/conv2d.hpp"
#include "nn/conv_transpose2d.hpp"

namespace noeira {
namespace {

using testing::expect_same_on_both;
using testing::image_input;
using testing::Outputs;
using testing::Tol;

// Sums of up to a few hundred products, in cuDNN's order.
constexpr Tol kConv{1e-4, 1e-4};
// A resnet stage's filter gradients sum ~4,000 products of values in [-1, 1] (twice, the second
// vjp accumulating): partial sums of tens, whose fp32 roundings in two orders differ by ~5e-5.
constexpr Tol kLongConvSums{1e-3, 1e-4};

// A forward, a vjp (Overwrite), then a second vjp under Accumulate on top.
template <class M>
Outputs conv_step(Target t, std::int64_t rows) {
  M m(Init(t, InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, 42}));
  testing::randomize_conv_params(m, 5);
  Context ctx = Context::for_target(t);
  const Tensor x = image_input(rows, M::in_image, 6, t);
  const Tensor dy = image_input(rows, M::out_image, 7, t);
  Outputs out{{"y", m.forward(ctx, x).to_vector()}};
  out.emplace_back("dx", m.vjp(ctx, dy, InputGrad::Compute).to_vector());
  ctx.grad_mode = GradMode::Accumulate;
  m.vjp(ctx, dy, InputGrad::Skip);
  for_each_param(m, [&](const std::string& name, Param& p) {
    out.emplace_back("grad " + name, p.grd.to_vector());
  });
  return out;
}

template <class M>
void check_both_targets(std::int64_t rows, Tol tol = kConv) {
  SCOPED_TRACE("rows " + std::to_string(rows));
  expect_same_on_both([&](Target t) { return conv_step<M>(t, rows); }, tol);
  // Deterministic on the GPU: the same bits twice.
  EXPECT_EQ(conv_step<M>(Target::Cuda, rows), conv_step<M>(Target::Cuda, rows));
}

TEST(CudaConv, Conv2DMatchesCpu) {
  NOEIRA_REQUIRE_GPU();
  check_both_targets<Conv2D<ConvSpec{{16, 32, 32}, 16, 3, 1, 1, 1, 1, false}>>(  // resnet stage
      4, kLongConvSums);
  check_both_targets<Conv2D<ConvSpec{{3, 9, 7}, 5, 3, 2, 2, 2}>>(3);
  check_both_targets<Conv2D<ConvSpec{{4, 6, 7}, 6, 3, 1, 0, 1, 2}>>(1);  // groups
  check_both_targets<Conv2D<ConvSpec{{8, 5, 5}, 4, 1}>>(5);              // pointwise
}

TEST(CudaConv, ConvTranspose2DMatchesCpu) {
  NOEIRA_REQUIRE_GPU();
  check_both_targets<ConvTranspose2D<ConvTransposeSpec{{4, 5, 6}, 3, 3, 2, 1, 1}>>(3);
  check_both_targets<ConvTranspose2D<ConvTransposeSpec{{4, 4, 3}, 6, 3, 1, 2, 0, 2, 2}>>(2);
  check_both_targets<ConvTranspose2D<ConvTransposeSpec{{6, 3, 3}, 2, 1, 1, 0, 0, 1, 1, false}>>(
      1);
}

}  // namespace
}  // namespace noeira
