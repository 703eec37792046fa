// The attention kernels of the CPU table against plain loops: batched_matmul over groups and
// items with every transpose, strides, alpha and beta; the masked softmax's visible prefixes;
// RoPE's inverse. (The CUDA versions are compared with these in test_cuda_attention.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attention_util.hpp"
#include "gradcheck.hpp"
#include "kernels/kernel_table.hpp"

namespace noeira {
namespace {

using testing::random_values;

const KernelTable& cpu() { return kernels_for(Target::Cpu); }

// The reference: C = alpha · op(A) · op(B) + beta · C for every item, in double.
void reference_matmul(const BatchedMatmulArgs& g, std::vector<float>& c) {
  for (std::int64_t group = 0; group < g.groups; ++group) {
    for (std::int64_t item = 0; item < g.batch; ++item) {
      const float* a = g.a.data + group * g.a.outer_stride + item * g.a.stride;
      const float* b = g.b.data + group * g.b.outer_stride + item * g.b.stride;
      const std::int64_t c0 = group * g.c.outer_stride + item * g.c.stride;
      for (std::int64_t i = 0; i < g.m; ++i) {
        for (std::int64_t j = 0; j < g.n; ++j) {
          double s = 0.0;
          for (std::int64_t p = 0; p < g.k; ++p) {
            const float av = g.trans_a ? a[p * g.a.ld + i] : a[i * g.a.ld + p];
            const float bv = g.trans_b ? b[j * g.b.ld + p] : b[p * g.b.ld + j];
            s += static_cast<double>(av) * bv;
          }
          float& out = c[static_cast<std::size_t>(c0 + i * g.c.ld + j)];
          out = static_cast<float>(g.alpha * s + (g.beta == 0.0f ? 0.0 : g.beta * out));
        }
      }
    }
  }
}

void check_case(const testing::MatmulLayout& l) {
  SCOPED_TRACE(testing::describe(l));
  testing::MatmulOperands o = testing::matmul_operands(Target::Cpu, l);
  std::vector<float> expected = o.c.to_vector();
  reference_matmul(o.args, expected);
  cpu().batched_matmul(nullptr, o.args);
  const std::vector<float> got = o.c.to_vector();
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], expected[i], 1e-5 * (1.0 + std::abs(expected[i]))) << "element " << i;
  }
}

TEST(BatchedMatmul, MatchesLoopsForEveryTransposeAndLayout) {
  // {ta, tb, m, n, k, batch, groups, head, pad, c_gap, alpha, beta}; C's gaps must stay as
  // they were.
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      check_case({ta, tb, 5, 3, 4, 3, 2, 5, 3, 2, 1.0f, 0.0f});
      check_case({ta, tb, 1, 7, 2, 1, 1, 7, 0, 0, 0.5f, 0.0f});      // one item
      check_case({ta, tb, 4, 4, 6, 2, 3, 6, 1, 1, -1.5f, 1.0f});     // accumulate into C
      check_case({ta, tb, 33, 40, 70, 4, 2, 70, 3, 2, 1.0f, 0.5f});  // beyond a register block
      check_case({ta, tb, 6, 5, 4, 3, 2, 2, 0, 0, 1.0f, 0.0f});      // items overlapping in A, B
    }
  }
  // Items big enough to take the serial path with OpenBLAS's threads.
  check_case({false, true, 200, 180, 150, 2, 1, 180, 0, 0, 0.25f, 0.0f});
}

TEST(MaskedSoftmax, EachRowSeesItsVisiblePrefix) {
  constexpr std::int64_t B = 2, H = 2, TQ = 3, TK = 5;
  const std::vector<float> x = random_values(B * H * TQ * TK, 4, -5.0f, 5.0f);
  const std::vector<std::int32_t> lengths = {4, 0};
  AttentionMask mask;
  mask.causal = true;
  mask.key_lengths = lengths.data();
  std::vector<float> y(x.size());
  cpu().masked_softmax_forward(nullptr, y.data(), x.data(), mask, B, H, TQ, TK);
  for (std::int64_t r = 0; r < B * H * TQ; ++r) {
    const std::int64_t b = r / (H * TQ);
    const std::int64_t position = TK - TQ + r % TQ;  // queries are the last TQ positions
    const std::int64_t n = std::min<std::int64_t>(position + 1, lengths[b]);
    double total = 0.0;
    for (std::int64_t j = 0; j < n; ++j) total += std::exp(static_cast<double>(x[r * TK + j]));
    for (std::int64_t j = 0; j < TK; ++j) {
      const double want = j < n ? std::exp(static_cast<double>(x[r * TK + j])) / total : 0.0;
      EXPECT_NEAR(y[r * TK + j], want, 1e-6) << "row " << r << " key " << j;
    }
  }
  // In place, without a mask: the plain softmax.
  std::vector<float> inplace = x;
  std::vector<float> plain(x.size());
  cpu().masked_softmax_forward(nullptr, inplace.data(), inplace.data(), AttentionMask{}, B, H, TQ,
                               TK);
  cpu().softmax_forward(nullptr, plain.data(), x.data(), B * H * TQ, TK);
  EXPECT_EQ(inplace, plain);
}

TEST(RopeKernel, InverseUndoesForwardInPlace) {
  constexpr std::int64_t rows = 6, seq = 3, heads = 2, dim = 6;
  const std::vector<float> x = random_values(rows * heads * dim, 5);
  for (const RopePairs pairs : {RopePairs::SplitHalves, RopePairs::Interleaved}) {
    const RopeGeometry g{rows, seq, heads, dim, 1000, 10000.0f, pairs};
    std::vector<float> y = x;
    cpu().rope(nullptr, Rotation::Forward, g, y.data(), y.data());
    EXPECT_NE(y, x);
    cpu().rope(nullptr, Rotation::Inverse, g, y.data(), y.data());
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-6) << i;
  }
}

}  // namespace
}  // namespace noeira
