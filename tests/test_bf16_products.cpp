// The CPU's bf16 table (--precision bf16): its matrix products equal the fp32 table's on
// operands rounded to bfloat16 beforehand (exact products, fp32 accumulation: only the order of
// the sums may differ), and differ from the fp32 table's on the unrounded operands — so the
// rounding happens, and happens to every operand (A and B, the forward's and the backward's).
// Every other kernel of the table is the fp32 table's. The rounding itself against PyTorch's is
// checked by the bf16 case of tests/gpt_torch_check.py, whose reference rounds with PyTorch.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attention_util.hpp"
#include "gradcheck.hpp"
#include "kernels/bf16_math.hpp"
#include "kernels/cpu/bf16_rounding.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/vector_isa.hpp"
#include "kernels/kernel_table.hpp"

namespace noeira {
namespace {

using testing::random_values;

const KernelTable& fp32() { return kernels_for(Target::Cpu, Precision::Fp32); }
const KernelTable& bf16() { return kernels_for(Target::Cpu, Precision::Bf16); }

std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = round_to_bf16(x);
  return v;
}

// got (the bf16 table on the operands) against want (the fp32 table on the rounded operands),
// and far from plain (the fp32 table on the operands).
void expect_bf16_products(const std::vector<float>& got, const std::vector<float>& want,
                          const std::vector<float>& plain, const char* what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.size(), want.size());
  double off_plain = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 2e-5 * (1.0 + std::abs(want[i]))) << "element " << i;
    off_plain = std::max(off_plain, std::abs(static_cast<double>(got[i]) - plain[i]));
  }
  EXPECT_GT(off_plain, 1e-3) << "the bf16 products equal the fp32 ones: nothing was rounded";
}

TEST(Bf16Rounding, NearestEvenAndSpecialValues) {
  EXPECT_EQ(round_to_bf16(1.0f), 1.0f);
  EXPECT_EQ(round_to_bf16(1.0f + 0x1p-8f), 1.0f);                   // halfway: to even
  EXPECT_EQ(round_to_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);     // halfway: to even
  EXPECT_EQ(round_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);  // past halfway: up
  EXPECT_EQ(round_to_bf16(-2.5f), -2.5f);
  EXPECT_TRUE(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(round_to_bf16(std::bit_cast<float>(0x7F800001u))));  // signalling NaN
  EXPECT_EQ(round_to_bf16(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  // The largest float rounds up to infinity, as PyTorch's does.
  EXPECT_EQ(round_to_bf16(std::numeric_limits<float>::max()),
            std::numeric_limits<float>::infinity());
  for (float x : random_values(1000, 7, -100.0f, 100.0f)) {
    EXPECT_LE(std::abs(round_to_bf16(x) - x), std::abs(x) * 0x1p-8f) << x;
  }
}

// The rounding of the products' operands (kernels/cpu/bf16_rounding.hpp) gives bf16_bits' bits
// whether or not it uses the CPU's conversion: on every denormal of either sign (the inputs the
// instruction flushes to zero), on every exponent with the fractions around a tie, at the
// largest float, on NaNs and infinities, and with a denormal at every place of a block of 32 and
// in the tail; and so does the software rounding at every vector width.
TEST(Bf16Rounding, TheCpusConversionRoundsAsBf16Bits) {
  RecordProperty("cpu_conversion", cpu::cpu_converts_bf16() ? "yes" : "no");
  std::vector<std::uint32_t> inputs;
  for (std::uint32_t sign : {0u, 0x80000000u}) {
    for (std::uint32_t exponent = 0; exponent < 256; ++exponent) {
      for (std::uint32_t fraction :
           {0x0u, 0x1u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu, 0x10000u, 0x17FFFu, 0x18000u,
            0x18001u, 0x3FFFFFu, 0x400000u, 0x7F7FFFu, 0x7F8000u, 0x7FFFFFu}) {
        inputs.push_back(sign | exponent << 23 | fraction);
      }
    }
  }
  const std::vector<float> mixed = random_values(4096, 31, -10.0f, 10.0f);
  for (std::size_t at = 0; at < mixed.size(); ++at) {
    // A denormal at every place of the blocks of 32.
    inputs.push_back(at % 37 == 0 ? 0x00012345u : std::bit_cast<std::uint32_t>(mixed[at]));
  }
  auto check = [](const std::vector<std::uint32_t>& bits, const char* what) {
    SCOPED_TRACE(what);
    std::vector<float> values(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) values[i] = std::bit_cast<float>(bits[i]);
    std::vector<std::uint16_t> got(bits.size());
    // Lengths that are no whole number of blocks: every call ends in a tail.
    constexpr std::size_t kCall = 1000;
    for (std::size_t at = 0; at < bits.size(); at += kCall) {
      const std::size_t n = std::min(kCall, bits.size() - at);
      cpu::round_to_bf16_bits(got.data() + at, values.data() + at, static_cast<std::int64_t>(n));
    }
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < bits.size(); ++i) {
      if (got[i] != bf16_bits(std::bit_cast<float>(bits[i])) && ++wrong <= 5) {
        ADD_FAILURE() << std::hex << "input 0x" << bits[i] << ": 0x" << got[i] << ", want 0x"
                      << bf16_bits(std::bit_cast<float>(bits[i]));
      }
    }
    EXPECT_EQ(wrong, 0u);
  };
  std::vector<std::uint32_t> denormals;
  denormals.reserve(std::size_t{2} << 23);
  for (std::uint32_t sign : {0u, 0x80000000u}) {
    for (std::uint32_t fraction = 1; fraction < (1u << 23); ++fraction) {
      denormals.push_back(sign | fraction);
    }
  }
  // Through the CPU's conversion where it has one, then in software at every narrower width.
  const cpu::VectorIsa best = cpu::best_vector_isa();
  for (cpu::VectorIsa isa : {cpu::VectorIsa::Avx512, cpu::VectorIsa::Avx2, cpu::VectorIsa::Sse2}) {
    if (static_cast<int>(isa) > static_cast<int>(best)) continue;
    SCOPED_TRACE(static_cast<int>(isa));
    cpu::set_vector_isa(isa);
    check(inputs, "every exponent, ties, specials, denormals among normals");
    check(denormals, "every denormal");
  }
  cpu::set_vector_isa(best);
}

// The conversions around bf16 reductions (--reduce-dtype bf16): to_bf16 rounds as bf16_bits,
// from_bf16 widens exactly and adds in fp32.
TEST(Bf16Conversions, RoundNearestEvenAndWidenExactly) {
  const KernelTable& k = fp32();
  std::vector<float> x = random_values(4097, 11, -3.0f, 3.0f);
  x[0] = 1.0f + 0x1p-8f;  // halfway: to even, 1
  x[1] = std::numeric_limits<float>::infinity();
  std::vector<std::uint16_t> bits(x.size());
  k.to_bf16(nullptr, bits.data(), x.data(), static_cast<std::int64_t>(x.size()));
  std::vector<float> widened(x.size()), added(x.size(), 0.25f);
  k.from_bf16(nullptr, GradMode::Overwrite, widened.data(), bits.data(),
              static_cast<std::int64_t>(x.size()));
  k.from_bf16(nullptr, GradMode::Accumulate, added.data(), bits.data(),
              static_cast<std::int64_t>(x.size()));
  EXPECT_EQ(widened[0], 1.0f);
  EXPECT_EQ(widened[1], std::numeric_limits<float>::infinity());
  std::size_t changed = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(bits[i], bf16_bits(x[i])) << i;
    ASSERT_EQ(widened[i], round_to_bf16(x[i])) << i;
    ASSERT_EQ(added[i], 0.25f + round_to_bf16(x[i])) << i;
    changed += widened[i] != x[i];
  }
  EXPECT_GT(changed, x.size() / 2);  // random fp32 values are rarely bf16 values
}

TEST(Bf16Table, OnlyTheMatrixProductsDiffer) {
  EXPECT_EQ(bf16().precision, Precision::Bf16);
  EXPECT_EQ(fp32().precision, Precision::Fp32);
  EXPECT_NE(bf16().linear_forward, fp32().linear_forward);
  EXPECT_NE(bf16().batched_matmul, fp32().batched_matmul);
  EXPECT_NE(bf16().conv2d_backward_filter, fp32().conv2d_backward_filter);
  EXPECT_EQ(bf16().norm_forward, fp32().norm_forward);
  EXPECT_EQ(bf16().row_loss, fp32().row_loss);
  EXPECT_EQ(bf16().adam_step, fp32().adam_step);
  EXPECT_EQ(bf16().softmax_forward, fp32().softmax_forward);
}

TEST(Bf16Table, LinearForwardAndBackward) {
  constexpr std::int64_t rows = 37, in = 70, out = 29;
  const std::vector<float> x = random_values(rows * in, 1), w = random_values(out * in, 2),
                           b = random_values(out, 3), dy = random_values(rows * out, 4),
                           dw0 = random_values(out * in, 5);
  auto forward = [&](const KernelTable& k, const std::vector<float>& xs,
                     const std::vector<float>& ws) {
    std::vector<float> y(rows * out), pre(rows * out);
    k.linear_forward(nullptr, Activation::GeluTanh, y.data(), pre.data(), xs.data(), ws.data(),
                     b.data(), rows, in, out);
    return y;
  };
  expect_bf16_products(forward(bf16(), x, w), forward(fp32(), rounded(x), rounded(w)),
                       forward(fp32(), x, w), "forward");

  // Identity: the output gradient is the products' operand itself. dw accumulates onto dw0.
  auto backward = [&](const KernelTable& k, const std::vector<float>& xs,
                      const std::vector<float>& ws, const std::vector<float>& dys) {
    std::vector<float> dx(rows * in), dw = dw0, db(out);
    k.linear_backward(nullptr, Activation::Identity, GradMode::Accumulate, dx.data(), dw.data(),
                      db.data(), nullptr, dys.data(), xs.data(), ws.data(), nullptr, nullptr, rows,
                      in, out);
    dx.insert(dx.end(), dw.begin(), dw.end());
    return dx;
  };
  expect_bf16_products(backward(bf16(), x, w, dy),
                       backward(fp32(), rounded(x), rounded(w), rounded(dy)),
                       backward(fp32(), x, w, dy), "backward: dx, then dw");
}

// Through an activation both products read g = dy ⊙ act'(pre) rounded (kernels/cpu/linear.cpp
// rounds it once, in the derivative's pass, for the two of them); the bias gradient sums g
// unrounded, as the fp32 table does.
TEST(Bf16Table, LinearBackwardThroughAnActivation) {
  constexpr std::int64_t rows = 41, in = 66, out = 35;
  const std::vector<float> x = random_values(rows * in, 11), w = random_values(out * in, 12),
                           b = random_values(out, 13), dy = random_values(rows * out, 14);
  std::vector<float> y(rows * out), pre(rows * out);
  fp32().linear_forward(nullptr, Activation::GeluTanh, y.data(), pre.data(), x.data(), w.data(),
                        b.data(), rows, in, out);
  struct Grads {
    std::vector<float> dx, dw, db, dpre;
  };
  auto backward = [&](const KernelTable& k, Activation act, const std::vector<float>& xs,
                      const std::vector<float>& ws, const std::vector<float>& dys) {
    Grads g{std::vector<float>(rows * in), std::vector<float>(out * in), std::vector<float>(out),
            std::vector<float>(rows * out)};
    k.linear_backward(nullptr, act, GradMode::Overwrite, g.dx.data(), g.dw.data(), g.db.data(),
                      g.dpre.data(), dys.data(), xs.data(), ws.data(), y.data(), pre.data(), rows,
                      in, out);
    g.dx.insert(g.dx.end(), g.dw.begin(), g.dw.end());
    return g;
  };
  const Grads got = backward(bf16(), Activation::GeluTanh, x, w, dy);
  const Grads plain = backward(fp32(), Activation::GeluTanh, x, w, dy);
  // The products of the rounded operands: an Identity backward whose output gradient is g rounded.
  const Grads want = backward(fp32(), Activation::Identity, rounded(x), rounded(w),
                              rounded(plain.dpre));
  expect_bf16_products(got.dx, want.dx, plain.dx, "dx, then dw");
  EXPECT_EQ(got.dpre, plain.dpre);
  EXPECT_EQ(got.db, plain.db);
}

TEST(Bf16Table, BatchedMatmulEveryTransposeAlphaAndBeta) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      // {ta, tb, m, n, k, batch, groups, head, pad, c_gap, alpha, beta}: strided items whose C
      // gaps must stay as they were, alpha and beta; then items large enough for the serial path.
      for (const testing::MatmulLayout& l :
           {testing::MatmulLayout{ta, tb, 33, 40, 70, 4, 2, 70, 3, 2, 0.125f, 0.5f},
            testing::MatmulLayout{ta, tb, 200, 180, 150, 1, 1, 180, 0, 0, 1.0f, 0.0f}}) {
        SCOPED_TRACE(testing::describe(l));
        auto run = [&](const KernelTable& k, bool round) {
          testing::MatmulOperands o = testing::matmul_operands(Target::Cpu, l);
          if (round) {
            o.a.copy_from(rounded(o.a.to_vector()));
            o.b.copy_from(rounded(o.b.to_vector()));
          }
          k.batched_matmul(nullptr, o.args);
          return o.c.to_vector();
        };
        expect_bf16_products(run(bf16(), false), run(fp32(), true), run(fp32(), false),
                             "batched_matmul");
      }
    }
  }
}

// A result whose rows are not contiguous (ldc > n: attention's heads side by side) goes through a
// dense buffer (kernels/cpu/gemm.cpp): beta still reads C, and the columns past n stay as they
// were.
TEST(Bf16Products, StridedResultAlphaAndBeta) {
  constexpr std::int64_t m = 37, n = 24, k = 53, ldc = n + 7;
  const std::vector<float> a = random_values(m * k, 21), b = random_values(k * n, 22),
                           c0 = random_values(m * ldc, 23);
  for (const float beta : {0.0f, 0.5f}) {
    SCOPED_TRACE(beta);
    auto run = [&](Precision precision, const std::vector<float>& as,
                   const std::vector<float>& bs) {
      std::vector<float> c = c0;
      cpu::gemm(precision, false, false, m, n, k, 0.25f, as.data(), k, bs.data(), n, beta,
                c.data(), ldc);
      return c;
    };
    const std::vector<float> got = run(Precision::Bf16, a, b);
    expect_bf16_products(got, run(Precision::Fp32, rounded(a), rounded(b)),
                         run(Precision::Fp32, a, b), "strided result");
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t j = n; j < ldc; ++j) {
        const auto at = static_cast<std::size_t>(r * ldc + j);
        ASSERT_EQ(got[at], c0[at]) << "row " << r << ", column " << j << " past n";
      }
    }
  }
}

TEST(Bf16Table, ConvolutionForwardDataAndFilter) {
  ConvGeometry g;
  g.images = 3;
  g.in_channels = 4, g.in_height = 9, g.in_width = 8;
  g.out_channels = 6, g.kernel = 3, g.stride = 1, g.padding = 1, g.groups = 2;
  g.out_height = 9, g.out_width = 8;
  const std::int64_t x_n = g.images * g.in_channels * g.in_height * g.in_width;
  const std::int64_t y_n = g.images * g.out_channels * g.out_height * g.out_width;
  const std::int64_t w_n = g.out_channels * (g.in_channels / g.groups) * g.kernel * g.kernel;
  const std::vector<float> x = random_values(x_n, 1), w = random_values(w_n, 2),
                           dy = random_values(y_n, 3);
  auto run = [&](const KernelTable& k, bool round) {
    const std::vector<float> xs = round ? rounded(x) : x, ws = round ? rounded(w) : w,
                             dys = round ? rounded(dy) : dy;
    std::vector<float> workspace(static_cast<std::size_t>(k.conv2d_workspace(g)));
    std::vector<float> y(y_n), dx(x_n), dw(w_n);
    k.conv2d_forward(nullptr, y.data(), xs.data(), ws.data(), nullptr, g, workspace.data());
    k.conv2d_backward_data(nullptr, dx.data(), dys.data(), ws.data(), nullptr, g,
                           workspace.data());
    k.conv2d_backward_filter(nullptr, GradMode::Overwrite, dw.data(), dys.data(), xs.data(), g,
                             workspace.data());
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), dw.begin(), dw.end());
    return y;
  };
  expect_bf16_products(run(bf16(), false), run(fp32(), true), run(fp32(), false),
                       "y, then dx, then dw");
}

}  // namespace
}  // namespace noeira
