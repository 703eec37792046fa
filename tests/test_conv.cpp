// Conv2D and ConvTranspose2D against finite differences (odd sizes, stride, padding, dilation,
// groups, bias on and off, pointwise 1x1), against closed forms, under GradMode::Accumulate, and
// for the same bits at any thread count. PyTorch's own numbers: tests/test_conv_torch.cpp.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "conv_util.hpp"
#include "gradcheck.hpp"
#include "leaf_util.hpp"
#include "nn/conv2d.hpp"
#include "nn/conv_transpose2d.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"

namespace noeira {
namespace {

using testing::gradcheck;
using testing::image_input;
using testing::kLeafInit;
using testing::param_grad;
using testing::random_values;
using testing::randomize_conv_params;

template <class M>
void check_leaf(std::int64_t rows, std::uint32_t seed) {
  SCOPED_TRACE("rows " + std::to_string(rows));
  M m(kLeafInit);
  randomize_conv_params(m, seed);
  gradcheck(m, image_input(rows, M::in_image, seed + 100));
}

// Batches of 1 and 3, and of 37: more images than the weight gradient's blocks of images
// (kernels/cpu/conv2d.cpp), so that a block sums several.
template <class M>
void check_leaf_batches(std::uint32_t seed) {
  check_leaf<M>(1, seed);
  check_leaf<M>(3, seed + 1);
  check_leaf<M>(37, seed + 2);
}

TEST(Conv2D, GradientsMatchFiniteDifferences) {
  check_leaf_batches<Conv2D<ConvSpec{{3, 7, 5}, 4, 3, 1, 1}>>(1);
  check_leaf_batches<Conv2D<ConvSpec{{2, 9, 8}, 3, 3, 2, 2, 2}>>(2);  // stride, padding, dilation
  check_leaf_batches<Conv2D<ConvSpec{{4, 6, 7}, 6, 3, 1, 0, 1, 2, false}>>(3);  // groups, no bias
  check_leaf_batches<Conv2D<ConvSpec{{3, 8, 7}, 6, 2, 3, 1, 1, 3}>>(4);  // even kernel, stride 3
  check_leaf_batches<Conv2D<ConvSpec{{5, 4, 3}, 3, 1}>>(5);              // pointwise: no im2col
  check_leaf_batches<Conv2D<ConvSpec{{3, 5, 5}, 2, 1, 2}>>(6);           // 1x1, stride 2
  check_leaf_batches<Conv2D<ConvSpec{{4, 5, 5}, 4, 3, 1, 1, 1, 4}>>(7);  // depthwise
}

TEST(ConvTranspose2D, GradientsMatchFiniteDifferences) {
  // stride 2, padding 1, output_padding 1: the upsampling of a decoder
  check_leaf_batches<ConvTranspose2D<ConvTransposeSpec{{3, 4, 5}, 2, 3, 2, 1, 1}>>(11);
  check_leaf_batches<ConvTranspose2D<ConvTransposeSpec{{4, 3, 3}, 6, 3, 1, 0, 0, 2, 2}>>(12);
  check_leaf_batches<ConvTranspose2D<ConvTransposeSpec{{2, 5, 4}, 3, 2, 2, 0, 0, 1, 1, false}>>(13);
  check_leaf_batches<ConvTranspose2D<ConvTransposeSpec{{4, 3, 3}, 2, 1}>>(14);  // pointwise
  check_leaf_batches<ConvTranspose2D<ConvTransposeSpec{{3, 4, 4}, 3, 3, 3, 2, 2, 1, 3}>>(15);
}

TEST(Conv2D, ForwardMatchesClosedForm) {
  // One 3x3 image 1..9, a 2x2 kernel [[1, 2], [3, 4]], bias 0.5, padding 1, stride 2: outputs at
  // input rows/cols {-1, 1} x {-1, 1}, each the taps that fall inside.
  Conv2D<ConvSpec{{1, 3, 3}, 1, 2, 2, 1}> conv(kLeafInit);
  for_each_param(conv, [](const std::string& name, Param& p) {
    p.val.copy_from(name == "weight" ? std::vector<float>{1, 2, 3, 4} : std::vector<float>{0.5f});
  });
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = Tensor::from_host({1, 9}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Tensor& y = conv.forward(ctx, x);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  // (0,0): tap (1,1) on x(0,0) = 4·1; (0,1): taps (1,0),(1,1) on x(0,1),x(0,2) = 3·2 + 4·3;
  // (1,0): taps (0,1),(1,1) on x(1,0),x(2,0) = 2·4 + 4·7; (1,1): all four on x(1..2, 1..2).
  EXPECT_EQ(y.to_vector(),
            (std::vector<float>{4.5f, 18.5f, 36.5f, 1 * 5 + 2 * 6 + 3 * 8 + 4 * 9 + 0.5f}));
}

TEST(ConvTranspose2D, ForwardSpreadsEachPixelOverTheKernel) {
  // Two pixels at stride 3 with a 2x2 kernel: each pixel writes value · kernel into its own
  // block, with the gap between them only the bias.
  ConvTranspose2D<ConvTransposeSpec{{1, 1, 2}, 1, 2, 3}> up(kLeafInit);
  for_each_param(up, [](const std::string& name, Param& p) {
    p.val.copy_from(name == "weight" ? std::vector<float>{1, 2, 3, 4} : std::vector<float>{-1});
  });
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = Tensor::from_host({1, 1, 1, 2}, std::vector<float>{2, 10});
  const Tensor& y = up.forward(ctx, x);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 5}));
  EXPECT_EQ(y.to_vector(), (std::vector<float>{1, 3, -1, 9, 19, 5, 7, -1, 29, 39}));
}

TEST(Conv2D, ReadsFlatRowsAndChainsIntoLinear) {
  // [rows, C·H·W] in, [rows, C, H, W] out, and a Linear reads that as rows of C·H·W.
  using C = Conv2D<ConvSpec{{1, 5, 5}, 2, 3}>;
  static_assert(C::out_image == ImageShape{2, 3, 3} && C::out_dim == 18);
  Sequential<C, Linear<18, 4>> net(kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = Tensor::from_host({3, 25}, random_values(75, 3));
  EXPECT_EQ(net.forward(ctx, x).shape(), (Shape{3, 4}));
  gradcheck(net, x);
}

TEST(Conv2D, WrongInputWidthNamesTheLayer) {
  Conv2D<ConvSpec{{2, 4, 4}, 2, 3}> conv(kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  try {
    conv.forward(ctx, Tensor({2, 31}));
    FAIL() << "a row of 31 was accepted for 2x4x4 images";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Conv2D"), std::string::npos) << e.what();
  }
}

TEST(Conv2D, WithoutBiasHasOnlyAWeight) {
  Conv2D<ConvSpec{{4, 3, 3}, 6, 3, 1, 1, 1, 2, false}> conv(kLeafInit);
  std::vector<std::string> names;
  for_each_param(conv, [&](const std::string& name, Param& p) {
    names.push_back(name + " " + shape_string(p.shape()));
  });
  EXPECT_EQ(names, (std::vector<std::string>{"weight [6, 2, 3, 3]"}));
  ConvTranspose2D<ConvTransposeSpec{{4, 3, 3}, 6, 3, 1, 1, 0, 1, 2}> up(kLeafInit);
  names.clear();
  for_each_param(up, [&](const std::string& name, Param& p) {
    names.push_back(name + " " + shape_string(p.shape()));
  });
  EXPECT_EQ(names, (std::vector<std::string>{"weight [4, 3, 3, 3]", "bias [6]"}));
}

// A second vjp under Accumulate adds its gradients to the first's.
template <class M>
void check_accumulates() {
  M m(kLeafInit);
  randomize_conv_params(m, 21);
  Context ctx = Context::for_target(Target::Cpu);
  const std::int64_t rows = 5;
  const Tensor x = image_input(rows, M::in_image, 22);
  const Tensor dy1 = image_input(rows, M::out_image, 23);
  const Tensor dy2 = image_input(rows, M::out_image, 24);
  std::vector<std::vector<float>> first, second, both;
  auto grads = [&] {
    std::vector<std::vector<float>> g;
    for_each_param(m, [&](const std::string&, Param& p) { g.push_back(p.grd.to_vector()); });
    return g;
  };
  m.forward(ctx, x);
  m.vjp(ctx, dy1, InputGrad::Skip);
  first = grads();
  m.vjp(ctx, dy2, InputGrad::Skip);
  second = grads();
  m.vjp(ctx, dy1, InputGrad::Skip);
  ctx.grad_mode = GradMode::Accumulate;
  m.vjp(ctx, dy2, InputGrad::Skip);
  both = grads();
  ASSERT_EQ(both.size(), first.size());
  for (std::size_t t = 0; t < both.size(); ++t) {
    for (std::size_t i = 0; i < both[t].size(); ++i) {
      const float sum = first[t][i] + second[t][i];
      EXPECT_NEAR(both[t][i], sum, 1e-5f * (1.0f + std::abs(sum))) << "tensor " << t << " [" << i
                                                                    << "]";
    }
  }
}

TEST(Conv2D, AccumulateAddsToTheGradients) {
  check_accumulates<Conv2D<ConvSpec{{3, 6, 5}, 4, 3, 1, 1}>>();
  check_accumulates<Conv2D<ConvSpec{{4, 4, 4}, 2, 1, 1, 0, 1, 2}>>();
}

TEST(ConvTranspose2D, AccumulateAddsToTheGradients) {
  check_accumulates<ConvTranspose2D<ConvTransposeSpec{{3, 4, 3}, 2, 3, 2, 1, 1}>>();
}

// Every output and gradient of one step, at a given thread count.
template <class M>
std::vector<std::vector<float>> one_step(int threads, std::int64_t rows) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  M m(kLeafInit);
  randomize_conv_params(m, 31);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = image_input(rows, M::in_image, 32);
  std::vector<std::vector<float>> out{m.forward(ctx, x).to_vector()};
  out.push_back(m.vjp(ctx, image_input(rows, M::out_image, 33), InputGrad::Compute).to_vector());
  for_each_param(m, [&](const std::string&, Param& p) { out.push_back(p.grd.to_vector()); });
  omp_set_num_threads(saved);
  return out;
}

// Chunks of images go over the threads, a single image runs on one; oneDNN's own threads never
// cut a primitive (kernels/cpu/conv2d.cpp), which a layer this large would show.
template <class M>
void check_same_bits_for_any_thread_count(std::initializer_list<std::int64_t> row_counts = {37,
                                                                                          1}) {
  for (std::int64_t rows : row_counts) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    const auto one = one_step<M>(1, rows);
    EXPECT_EQ(one_step<M>(2, rows), one);
    EXPECT_EQ(one_step<M>(3, rows), one);
  }
}

TEST(Conv2D, SameBitsForAnyThreadCount) {
  check_same_bits_for_any_thread_count<Conv2D<ConvSpec{{8, 12, 12}, 16, 3, 1, 1}>>();
  check_same_bits_for_any_thread_count<Conv2D<ConvSpec{{16, 9, 9}, 8, 1}>>();
  // Products above OpenBLAS's single-thread bound (32x256x144 and 32x144x256).
  check_same_bits_for_any_thread_count<Conv2D<ConvSpec{{16, 16, 16}, 32, 3, 1, 1}>>();
}

// A weight too large for per-block partials: its gradient is summed in chunks of output
// channels. Sampled elements against a direct sum in double, and the same bits at any thread
// count.
TEST(Conv2D, LargeWeightGradientMatchesDirectSum) {
  constexpr std::int64_t C = 512, H = 2, W = 3, rows = 2;
  using Big = Conv2D<ConvSpec{{C, H, W}, C, 3, 1, 1, 1, 1, false}>;
  Big conv(kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = image_input(rows, Big::in_image, 41);
  const Tensor dy = image_input(rows, Big::out_image, 42);
  conv.forward(ctx, x);
  conv.vjp(ctx, dy, InputGrad::Skip);
  const std::vector<float> dw = param_grad(conv, "weight");
  const std::vector<float> xv = x.to_vector(), dyv = dy.to_vector();
  for (std::size_t e : testing::sample_indices(dw.size(), 64, 43)) {
    const std::int64_t co = static_cast<std::int64_t>(e) / (C * 9);
    const std::int64_t ci = static_cast<std::int64_t>(e) / 9 % C;
    const std::int64_t i = static_cast<std::int64_t>(e) / 3 % 3;
    const std::int64_t j = static_cast<std::int64_t>(e) % 3;
    double sum = 0.0;
    for (std::int64_t n = 0; n < rows; ++n) {
      for (std::int64_t oh = 0; oh < H; ++oh) {
        for (std::int64_t ow = 0; ow < W; ++ow) {
          const std::int64_t ih = oh - 1 + i, iw = ow - 1 + j;
          if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
          sum += static_cast<double>(dyv[((n * C + co) * H + oh) * W + ow]) *
                 xv[((n * C + ci) * H + ih) * W + iw];
        }
      }
    }
    EXPECT_NEAR(dw[e], sum, 1e-5 * (1.0 + std::abs(sum))) << "dw[" << e << "]";
  }
  check_same_bits_for_any_thread_count<Big>({2});
}

TEST(ConvTranspose2D, SameBitsForAnyThreadCount) {
  check_same_bits_for_any_thread_count<
      ConvTranspose2D<ConvTransposeSpec{{8, 6, 6}, 4, 3, 2, 1, 1}>>();
}

}  // namespace
}  // namespace noeira

namespace noeira {
namespace {

// A geometry oneDNN refuses (an output size the window cannot give), over several chunks of
// images on several threads: one error naming the kernel and the geometry, thrown to the caller
// from inside the threads' region, not a terminated process.
TEST(Conv2DKernels, AGeometryOneDnnRefusesIsAnErrorNamingIt) {
  const KernelTable& k = kernels_for(Target::Cpu);
  const ConvGeometry g{.images = 20, .in_channels = 3, .in_height = 8, .in_width = 8,
                       .out_channels = 4, .out_height = 5, .out_width = 5, .kernel = 3,
                       .stride = 1, .padding = 0};  // 8 - 3 + 1 = 6, not 5
  std::vector<float> x(20 * 3 * 8 * 8, 1.0f), y(20 * 4 * 5 * 5), w(4 * 3 * 3 * 3, 1.0f);
  std::vector<float> workspace(static_cast<std::size_t>(k.conv2d_workspace(g)));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  try {
    k.conv2d_forward(nullptr, y.data(), x.data(), w.data(), nullptr, g, workspace.data());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("conv2d_forward (oneDNN) of 8x3x8x8 to 4 channels, kernel 3"),
              std::string::npos)
        << what;
  }
  EXPECT_THROW(k.conv2d_backward_filter(nullptr, GradMode::Overwrite, w.data(), y.data(),
                                        x.data(), g, workspace.data()),
               Error);
  EXPECT_EQ(omp_get_max_threads(), 2);  // the kernel's one-thread scope is undone
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace noeira
