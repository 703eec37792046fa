// The pooling and upsampling kernels and leaves on CUDA against the CPU reference
// (tests/cuda_compare.hpp). Both backends run the same per-element math
// (kernels/pool_math.hpp) in the same order, with no multiply to fuse, so every output, argmax
// and gradient must have the same bits. Without a CUDA device every test is skipped.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cuda_compare.hpp"
#include "gpu_skip.hpp"
#include "leaf_util.hpp"
#include "nn/pool2d.hpp"
#include "nn/upsample.hpp"
#include "pool_util.hpp"

namespace noeira {
namespace {

using testing::expect_same_on_both;
using testing::kExact;
using testing::Outputs;

// The leaf's output and input gradient for `rows` images on target t (dy as [rows, C, H, W]
// also for GlobalAvgPool2D: a gradient is read as its rows' elements).
template <class M>
Outputs run_leaf(Target t, std::int64_t rows, bool distinct, std::uint32_t seed) {
  M m(testing::kLeafInit);
  Context ctx = Context::for_target(t);
  const Tensor x = distinct ? testing::distinct_images(rows, M::in_image, seed, t)
                            : testing::random_images(rows, M::in_image, seed, t);
  const Tensor dy = testing::random_images(rows, M::out_image, seed + 1, t);
  const std::vector<float> y = m.forward(ctx, x).to_vector();
  return {{"y", y}, {"dx", m.vjp(ctx, dy, InputGrad::Compute).to_vector()}};
}

template <class M>
void expect_leaf_same_on_both(bool distinct, std::uint32_t seed) {
  for (std::int64_t rows : {1, 5}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    expect_same_on_both([&](Target t) { return run_leaf<M>(t, rows, distinct, seed); }, kExact);
  }
}

TEST(CudaPool, MaxPoolLeafMatchesCpu) {
  NOEIRA_REQUIRE_GPU();
  expect_leaf_same_on_both<MaxPool2D<testing::kOverlapping>>(true, 1);
  expect_leaf_same_on_both<MaxPool2D<testing::kTiled>>(true, 2);
  expect_leaf_same_on_both<MaxPool2D<testing::kDense>>(true, 3);
  expect_leaf_same_on_both<MaxPool2D<testing::kEvenPadded>>(true, 4);
  expect_leaf_same_on_both<MaxPool2D<testing::kSparse>>(true, 5);
}

TEST(CudaPool, AvgPoolLeavesMatchCpu) {
  NOEIRA_REQUIRE_GPU();
  expect_leaf_same_on_both<AvgPool2D<testing::kOverlapping>>(false, 11);
  expect_leaf_same_on_both<AvgPool2D<testing::kDense>>(false, 12);
  expect_leaf_same_on_both<AvgPool2D<testing::kSparse>>(false, 13);
  expect_leaf_same_on_both<GlobalAvgPool2D<ImageShape{3, 5, 7}>>(false, 14);
}

TEST(CudaPool, UpsampleLeafMatchesCpu) {
  NOEIRA_REQUIRE_GPU();
  expect_leaf_same_on_both<UpsampleNearest2D<ImageShape{2, 3, 5}, 2>>(false, 21);
  expect_leaf_same_on_both<UpsampleNearest2D<ImageShape{1, 4, 3}, 3>>(false, 22);
}

// The kernel on its own, with ties (a constant image) and NaNs: argmax must agree too.
TEST(CudaPool, MaxPoolKernelArgmaxMatchesCpuWithTiesAndNaN) {
  NOEIRA_REQUIRE_GPU();
  // 7 planes of 11 x 13 read by 3 x 3 windows, stride 2, padding 1 (out 6 x 7).
  const PoolGeometry g{.planes = 7, .in_h = 11, .in_w = 13, .out_h = 6, .out_w = 7,
                       .kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2,
                       .pad_h = 1, .pad_w = 1};
  std::vector<float> values = testing::random_values(7 * 11 * 13, 31);
  for (std::size_t i = 0; i < values.size(); i += 3) values[i] = 0.5f;  // ties
  values[40] = std::numeric_limits<float>::quiet_NaN();
  expect_same_on_both(
      [&](Target t) {
        const KernelTable& k = kernels_for(t);
        const Tensor x = testing::on(t, {7 * 11 * 13}, values);
        const Tensor dy = testing::random_on(t, {7 * 6 * 7}, 32);
        Tensor y({7 * 6 * 7}, t);
        Tensor argmax({7 * 6 * 7}, t, DType::I32);
        Tensor dx({7 * 11 * 13}, t);
        k.pool2d_forward(nullptr, Pooling::Max, y.data(), argmax.ids(), x.data(), g);
        k.pool2d_backward(nullptr, Pooling::Max, dx.data(), dy.data(), argmax.ids(), g);
        const std::vector<std::int32_t> at = argmax.to_ids();
        return Outputs{{"y", y.to_vector()},
                       {"argmax", std::vector<float>(at.begin(), at.end())},
                       {"dx", dx.to_vector()}};
      },
      kExact);
}

}  // namespace
}  // namespace noeira
