// Image leaves without parameters: MaxPool2D, AvgPool2D, GlobalAvgPool2D and UpsampleNearest2D,
// against finite differences over odd, non-square images and every stride and padding case
// (overlapping windows, disjoint ones, a stride past the kernel), against closed forms, and for
// the same gradient bits at any thread count. PyTorch's view of them: test_pool_torch.cpp.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "leaf_util.hpp"
#include "nn/linear.hpp"
#include "nn/pool2d.hpp"
#include "nn/sequential.hpp"
#include "nn/upsample.hpp"
#include "pool_util.hpp"

namespace noeira {
namespace {

using testing::distinct_images;
using testing::gradcheck;
using testing::kDense;
using testing::kEvenPadded;
using testing::kLeafInit;
using testing::kOverlapping;
using testing::kSparse;
using testing::kTiled;
using testing::random_images;

static_assert(Module<MaxPool2D<kOverlapping>> && Module<AvgPool2D<kOverlapping>>);
static_assert(Module<GlobalAvgPool2D<ImageShape{3, 4, 5}>>);
static_assert(Module<UpsampleNearest2D<ImageShape{2, 3, 4}, 2>>);
static_assert(MaxPool2D<kOverlapping>::out_image == ImageShape{2, 4, 5});
static_assert(AvgPool2D<kEvenPadded>::out_image == ImageShape{2, 5, 8});
static_assert(MaxPool2D<kSparse>::out_image == ImageShape{1, 3, 2});
static_assert(MaxPool2D<PoolSpec{{1, 28, 28}, 2, 2}>::out_dim == 14 * 14);
static_assert(GlobalAvgPool2D<ImageShape{3, 4, 5}>::out_dim == 3);
static_assert(UpsampleNearest2D<ImageShape{2, 3, 4}, 3>::out_image == ImageShape{2, 9, 12});

// Finite differences for every row count; max pooling reads inputs without near-ties (a central
// difference across a tie is not the derivative).
template <class M>
void check_leaf(std::uint32_t seed, bool needs_distinct_values) {
  testing::GradCheckOptions o;
  o.max_checked_per_tensor = 256;
  for (std::int64_t rows : testing::test_row_counts(seed)) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    M m(kLeafInit);
    const std::uint32_t input_seed = seed + static_cast<std::uint32_t>(rows);
    gradcheck(m,
              needs_distinct_values ? distinct_images(rows, M::in_image, input_seed)
                                    : random_images(rows, M::in_image, input_seed),
              o, seed);
  }
}

TEST(MaxPool2D, MatchesFiniteDifferences) {
  check_leaf<MaxPool2D<kOverlapping>>(1, true);
  check_leaf<MaxPool2D<kTiled>>(2, true);
  check_leaf<MaxPool2D<kDense>>(3, true);
  check_leaf<MaxPool2D<kEvenPadded>>(4, true);
  check_leaf<MaxPool2D<kSparse>>(5, true);
}

TEST(AvgPool2D, MatchesFiniteDifferences) {
  check_leaf<AvgPool2D<kOverlapping>>(11, false);
  check_leaf<AvgPool2D<kTiled>>(12, false);
  check_leaf<AvgPool2D<kDense>>(13, false);
  check_leaf<AvgPool2D<kEvenPadded>>(14, false);
  check_leaf<AvgPool2D<kSparse>>(15, false);
}

TEST(GlobalAvgPool2D, MatchesFiniteDifferences) {
  check_leaf<GlobalAvgPool2D<ImageShape{3, 5, 7}>>(21, false);
  check_leaf<GlobalAvgPool2D<ImageShape{1, 1, 1}>>(22, false);
}

TEST(UpsampleNearest2D, MatchesFiniteDifferences) {
  check_leaf<UpsampleNearest2D<ImageShape{2, 3, 5}, 2>>(31, false);
  check_leaf<UpsampleNearest2D<ImageShape{1, 4, 3}, 3>>(32, false);
  check_leaf<UpsampleNearest2D<ImageShape{2, 2, 2}, 1>>(33, false);
}

// Runs m forward on x [1, 1, h, w] and back with dy = 1 everywhere; returns {y, dx}.
template <class M>
std::pair<std::vector<float>, std::vector<float>> forward_and_back(M& m,
                                                                   const std::vector<float>& x) {
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor input = Tensor::from_host(image_batch_shape(1, M::in_image), x);
  const Tensor& y = m.forward(ctx, input);
  const Tensor ones = Tensor::from_host(y.shape(), std::vector<float>(y.numel(), 1.0f));
  return {y.to_vector(), m.vjp(ctx, ones, InputGrad::Compute).to_vector()};
}

TEST(MaxPool2D, ForwardAndGradientInClosedForm) {
  MaxPool2D<PoolSpec{{1, 3, 3}, 2, 1}> m(kLeafInit);
  const auto [y, dx] = forward_and_back(m, {1, 5, 2, 4, 3, 6, 0, 7, 8});
  EXPECT_EQ(y, (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(dx, (std::vector<float>{0, 1, 0, 0, 0, 1, 0, 1, 1}));
}

TEST(MaxPool2D, TiesGoToTheFirstCellAndPaddingIsMinusInfinity) {
  // A constant negative image padded by 1: padding must not win as a 0 would, and each window
  // gives its gradient to its first image cell in row-major order (PyTorch's choice).
  MaxPool2D<PoolSpec{{1, 2, 2}, 2, 1, 1}> m(kLeafInit);
  const auto [y, dx] = forward_and_back(m, {-3, -3, -3, -3});
  EXPECT_EQ(y, std::vector<float>(9, -3.0f));
  EXPECT_EQ(dx, (std::vector<float>{4, 2, 2, 1}));
}

TEST(MaxPool2D, NanPropagates) {
  MaxPool2D<PoolSpec{{1, 2, 4}, 2, 2}> m(kLeafInit);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto [y, dx] = forward_and_back(m, {1, nan, 3, 4, 5, 6, 7, 8});
  ASSERT_EQ(y.size(), 2u);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 8.0f);
  EXPECT_EQ(dx, (std::vector<float>{0, 1, 0, 0, 0, 0, 0, 1}));
}

TEST(AvgPool2D, PaddingCountsInTheDivisor) {
  // count_include_pad: every 3 × 3 window of a padded 2 × 2 image of ones averages 4 ones over 9.
  AvgPool2D<PoolSpec{{1, 2, 2}, 3, 1, 1}> m(kLeafInit);
  const auto [y, dx] = forward_and_back(m, {1, 1, 1, 1});
  for (float v : y) EXPECT_FLOAT_EQ(v, 4.0f / 9.0f);
  for (float v : dx) EXPECT_FLOAT_EQ(v, 4.0f / 9.0f);  // each pixel in all 4 windows
}

TEST(GlobalAvgPool2D, IsThePlaneMeanAsRowsOfChannels) {
  GlobalAvgPool2D<ImageShape{2, 2, 3}> m(kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = Tensor::from_host({1, 12}, std::vector<float>{1, 2, 3, 4, 5, 6, 0, 0, 0, 0,
                                                                 0, 12});
  const Tensor& y = m.forward(ctx, x);
  EXPECT_EQ(y.shape(), (Shape{1, 2}));
  EXPECT_EQ(y.to_vector(), (std::vector<float>{3.5f, 2.0f}));
  const Tensor dy = Tensor::from_host({1, 2}, std::vector<float>{6, 12});
  const Tensor& dx = m.vjp(ctx, dy, InputGrad::Compute);
  EXPECT_EQ(dx.shape(), (Shape{1, 12}));
  EXPECT_EQ(dx.to_vector(), (std::vector<float>{1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2}));
}

TEST(UpsampleNearest2D, RepeatsEachPixelAndSumsItsBlock) {
  UpsampleNearest2D<ImageShape{1, 1, 2}, 2> m(kLeafInit);
  const auto [y, dx] = forward_and_back(m, {1, 2});
  EXPECT_EQ(y, (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2}));
  EXPECT_EQ(dx, (std::vector<float>{4, 4}));
}

TEST(ImageLeaves, UpsampleThenMaxPoolIsTheIdentity) {
  // Each 2 × 2 window sees four copies of one pixel: the forward gives it back and the gradient
  // of the first copy is the block's whole gradient.
  Sequential<UpsampleNearest2D<ImageShape{2, 3, 5}, 2>, MaxPool2D<PoolSpec{{2, 6, 10}, 2, 2}>>
      m(kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = random_images(3, ImageShape{2, 3, 5}, 41);
  EXPECT_EQ(m.forward(ctx, x).to_vector(), x.to_vector());
  const Tensor dy = random_images(3, ImageShape{2, 3, 5}, 42);
  EXPECT_EQ(m.vjp(ctx, dy, InputGrad::Compute).to_vector(), dy.to_vector());
}

TEST(ImageLeaves, ComposeWithALinearHead) {
  using Net = Sequential<AvgPool2D<PoolSpec{{3, 7, 6}, 3, 2, 1}>, GlobalAvgPool2D<ImageShape{3, 4, 3}>,
                         Linear<3, 4>>;
  Net m(kLeafInit);
  gradcheck(m, random_images(5, ImageShape{3, 7, 6}, 43));
}

TEST(ImageLeaves, ReadRowsOfAnyShapeAndHaveNoParameters) {
  Context ctx = Context::for_target(Target::Cpu);
  MaxPool2D<PoolSpec{{1, 28, 28}, 2, 2}> pool(kLeafInit);
  const Tensor flat = testing::random_input(3, 784, 1);
  EXPECT_EQ(pool.forward(ctx, flat).shape(), (Shape{3, 1, 14, 14}));
  const Tensor dy = random_images(3, ImageShape{1, 14, 14}, 2);
  EXPECT_EQ(pool.vjp(ctx, dy, InputGrad::Compute).shape(), (Shape{3, 784}));
  EXPECT_FALSE(pool.vjp(ctx, dy, InputGrad::Skip).defined());
  EXPECT_EQ(parameter_count(pool), 0);
  EXPECT_THROW(pool.forward(ctx, testing::random_input(3, 783, 1)), InputError);

  UpsampleNearest2D<ImageShape{2, 3, 3}, 2> up(kLeafInit);
  EXPECT_EQ(up.forward(ctx, random_images(4, ImageShape{2, 3, 3}, 3)).shape(),
            (Shape{4, 2, 6, 6}));
  EXPECT_EQ(parameter_count(up), 0);
  EXPECT_THROW(up.forward(ctx, testing::random_input(4, 17, 1)), InputError);
}

// Input gradients are gathered per input element: the thread count must not change a bit.
template <class M>
std::vector<float> input_grad_with_threads(int threads) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  Context ctx = Context::for_target(Target::Cpu);
  M m(kLeafInit);
  const Tensor x = random_images(9, M::in_image, 51);  // > the parallel grain of 2^14 elements
  const Tensor dy = random_images(9, M::out_image, 52);
  m.forward(ctx, x);
  std::vector<float> dx = m.vjp(ctx, dy, InputGrad::Compute).to_vector();
  omp_set_num_threads(before);
  return dx;
}

template <class M>
void expect_same_bits_for_any_thread_count() {
  const std::vector<float> one = input_grad_with_threads<M>(1);
  EXPECT_EQ(input_grad_with_threads<M>(2), one);
  EXPECT_EQ(input_grad_with_threads<M>(3), one);
}

TEST(ImageLeaves, GradientsHaveTheSameBitsForAnyThreadCount) {
  constexpr PoolSpec kBig{{4, 33, 31}, 3, 2, 1};
  expect_same_bits_for_any_thread_count<MaxPool2D<kBig>>();
  expect_same_bits_for_any_thread_count<AvgPool2D<kBig>>();
  expect_same_bits_for_any_thread_count<GlobalAvgPool2D<ImageShape{4, 33, 31}>>();
  expect_same_bits_for_any_thread_count<UpsampleNearest2D<ImageShape{4, 33, 31}, 2>>();
}

}  // namespace
}  // namespace noeira
