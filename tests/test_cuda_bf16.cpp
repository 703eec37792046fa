// The GPU's bf16 table (--precision bf16 --device cuda) against the CPU's: every matrix product
// entry (Linear forward and backward, batched products over every transpose, convolution
// forward, data and filter) runs the same operands through kernels_for(Cuda, Bf16) and
// kernels_for(Cpu, Bf16). Both round the operands to bfloat16 the same way and add the exact
// products in fp32, so they agree within fp32 sums in another order (tests/cuda_compare.hpp's
// GEMM tolerance); and the GPU's bf16 results are far from its fp32 ones on the same operands,
// so the rounding happens on the GPU too. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attention_util.hpp"
#include "cuda_compare.hpp"
#include "gpu_skip.hpp"

namespace noeira {
namespace {

using testing::expect_same_on_both;
using testing::kGemm;
using testing::Outputs;
using testing::random_on;

const KernelTable& bf16(Target t) { return kernels_for(t, Precision::Bf16); }

// The largest difference between the GPU's bf16 and fp32 runs of the same outputs.
double largest_difference(const Outputs& a, const Outputs& b) {
  double largest = 0.0;
  for (std::size_t t = 0; t < a.size(); ++t) {
    for (std::size_t i = 0; i < a[t].second.size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(a[t].second[i]) - b[t].second[i]));
    }
  }
  return largest;
}

// run(table) on the CPU's and the GPU's bf16 tables compared, and the GPU's bf16 run against
// its fp32 one.
template <class Run>
void expect_bf16_on_the_gpu(const Run& run, testing::Tol tol = kGemm) {
  expect_same_on_both([&](Target t) { return run(bf16(t), t); }, tol);
  const Outputs gpu_bf16 = run(bf16(Target::Cuda), Target::Cuda);
  const Outputs gpu_fp32 = run(kernels_for(Target::Cuda), Target::Cuda);
  EXPECT_GT(largest_difference(gpu_bf16, gpu_fp32), 1e-3)
      << "the GPU's bf16 products equal its fp32 ones: nothing was rounded";
}

TEST(CudaBf16, TheTableSwapsOnlyTheMatrixProducts) {
  NOEIRA_REQUIRE_GPU();
  const KernelTable& fp32 = kernels_for(Target::Cuda);
  EXPECT_EQ(bf16(Target::Cuda).precision, Precision::Bf16);
  EXPECT_EQ(bf16(Target::Cuda).target, Target::Cuda);
  EXPECT_NE(bf16(Target::Cuda).linear_forward, fp32.linear_forward);
  EXPECT_NE(bf16(Target::Cuda).conv2d_backward_filter, fp32.conv2d_backward_filter);
  EXPECT_EQ(bf16(Target::Cuda).norm_forward, fp32.norm_forward);
  EXPECT_EQ(bf16(Target::Cuda).adam_step, fp32.adam_step);
}

TEST(CudaBf16, LinearForwardAndBackwardMatchTheCpu) {
  NOEIRA_REQUIRE_GPU();
  constexpr std::int64_t rows = 37, in = 72, out = 40;
  // GELU keeps its pre-activation (the fused epilogue's aux output on the GPU); the backward
  // accumulates dw onto a random start, with the bias gradient from the unrounded gradient.
  expect_bf16_on_the_gpu([&](const KernelTable& k, Target t) {
    const Tensor x = random_on(t, {rows, in}, 1), w = random_on(t, {out, in}, 2),
                 b = random_on(t, {out}, 3), dy = random_on(t, {rows, out}, 4);
    Tensor y = random_on(t, {rows, out}, 5), pre = random_on(t, {rows, out}, 6);
    k.linear_forward(nullptr, Activation::GeluTanh, y.data(), pre.data(), x.data(), w.data(),
                     b.data(), rows, in, out);
    Tensor dx = random_on(t, {rows, in}, 7), dw = random_on(t, {out, in}, 8),
           db = random_on(t, {out}, 9), dpre = random_on(t, {rows, out}, 10);
    k.linear_backward(nullptr, Activation::GeluTanh, GradMode::Accumulate, dx.data(), dw.data(),
                      db.data(), dpre.data(), dy.data(), x.data(), w.data(), y.data(),
                      pre.data(), rows, in, out);
    k.synchronize(nullptr);
    return Outputs{{"y", y.to_vector()},   {"pre", pre.to_vector()}, {"dx", dx.to_vector()},
                   {"dw", dw.to_vector()}, {"db", db.to_vector()}};
  }, testing::kGeluEpilogue);
}

TEST(CudaBf16, BatchedMatmulEveryTransposeMatchesTheCpu) {
  NOEIRA_REQUIRE_GPU();
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      // Strided items in groups with gaps in C, alpha and beta: the span a bf16 copy of an
      // operand covers includes the gaps between columns and items.
      const testing::MatmulLayout l{ta, tb, 33, 40, 70, 4, 2, 70, 3, 2, 0.125f, 0.5f};
      SCOPED_TRACE(testing::describe(l));
      expect_bf16_on_the_gpu([&](const KernelTable& k, Target t) {
        testing::MatmulOperands o = testing::matmul_operands(t, l);
        k.batched_matmul(nullptr, o.args);
        k.synchronize(nullptr);
        return Outputs{{"c", o.c.to_vector()}};
      });
    }
  }
}

TEST(CudaBf16, ConvolutionForwardDataAndFilterMatchTheCpu) {
  NOEIRA_REQUIRE_GPU();
  ConvGeometry g;
  g.images = 3;
  g.in_channels = 4, g.in_height = 9, g.in_width = 8;
  g.out_channels = 6, g.kernel = 3, g.stride = 1, g.padding = 1, g.groups = 2;
  g.out_height = 9, g.out_width = 8;
  expect_bf16_on_the_gpu([&](const KernelTable& k, Target t) {
    const std::int64_t x_n = g.images * g.in_image_floats();
    const std::int64_t y_n = g.images * g.out_image_floats();
    const Tensor x = random_on(t, {x_n}, 1), w = random_on(t, {g.weight_floats()}, 2),
                 b = random_on(t, {g.out_channels}, 3), dy = random_on(t, {y_n}, 4);
    Tensor y({y_n}, t), dx({x_n}, t), dw = random_on(t, {g.weight_floats()}, 5);
    Tensor workspace({std::max<std::int64_t>(1, k.conv2d_workspace(g))}, t);
    k.conv2d_forward(nullptr, y.data(), x.data(), w.data(), b.data(), g, workspace.data());
    k.conv2d_backward_data(nullptr, dx.data(), dy.data(), w.data(), nullptr, g,
                           workspace.data());
    k.conv2d_backward_filter(nullptr, GradMode::Accumulate, dw.data(), dy.data(), x.data(), g,
                             workspace.data());
    k.synchronize(nullptr);
    return Outputs{{"y", y.to_vector()}, {"dx", dx.to_vector()}, {"dw", dw.to_vector()}};
  });
}

}  // namespace
}  // namespace noeira
