// The attention kernels of the CPU table against plain loops: batched_matmul over groups and
// items with every transpose, strides, alpha and beta; the masked softmax's visible prefixes;
// RoPE's inverse. (The CUDA versions are compared with these in test_cuda_attention.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

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
      const float* a = g.a + group * g.outer_stride_a + item * g.stride_a;
      const float* b = g.b + group * g.outer_stride_b + item * g.stride_b;
      const std::int64_t c0 = group * g.outer_stride_c + item * g.stride_c;
      for (std::int64_t i = 0; i < g.m; ++i) {
        for (std::int64_t j = 0; j < g.n; ++j) {
          double s = 0.0;
          for (std::int64_t p = 0; p < g.k; ++p) {
            const float av = g.trans_a ? a[p * g.lda + i] : a[i * g.lda + p];
            const float bv = g.trans_b ? b[j * g.ldb + p] : b[p * g.ldb + j];
            s += static_cast<double>(av) * bv;
          }
          float& out = c[static_cast<std::size_t>(c0 + i * g.ldc + j)];
          out = static_cast<float>(g.alpha * s + (g.beta == 0.0f ? 0.0 : g.beta * out));
        }
      }
    }
  }
}

// Operands laid out as attention lays them: items (heads) `head` floats apart inside rows of
// `width`, groups (sequences) `rows · width` apart, C dense.
struct Case {
  bool ta, tb;
  std::int64_t m, n, k, batch, groups;
  float alpha, beta;
};

void check_case(const Case& t) {
  SCOPED_TRACE("ta " + std::to_string(t.ta) + " tb " + std::to_string(t.tb) + " m " +
               std::to_string(t.m) + " n " + std::to_string(t.n) + " k " + std::to_string(t.k) +
               " batch " + std::to_string(t.batch) + " groups " + std::to_string(t.groups));
  const std::int64_t a_rows = t.ta ? t.k : t.m, a_cols = t.ta ? t.m : t.k;
  const std::int64_t b_rows = t.tb ? t.n : t.k, b_cols = t.tb ? t.k : t.n;
  // Interleaved items: each row holds every item's columns, plus 3 unused ones.
  const std::int64_t lda = t.batch * a_cols + 3, ldb = t.batch * b_cols + 1;
  std::vector<float> a = random_values(static_cast<std::size_t>(t.groups * a_rows * lda), 1);
  std::vector<float> b = random_values(static_cast<std::size_t>(t.groups * b_rows * ldb), 2);
  const std::int64_t c_item = t.m * t.n + 2;  // a gap between items that must stay untouched
  std::vector<float> c = random_values(static_cast<std::size_t>(t.groups * t.batch * c_item), 3);
  BatchedMatmulArgs g;
  g.trans_a = t.ta;
  g.trans_b = t.tb;
  g.m = t.m;
  g.n = t.n;
  g.k = t.k;
  g.alpha = t.alpha;
  g.beta = t.beta;
  g.a = a.data();
  g.lda = lda;
  g.stride_a = a_cols;
  g.outer_stride_a = a_rows * lda;
  g.b = b.data();
  g.ldb = ldb;
  g.stride_b = b_cols;
  g.outer_stride_b = b_rows * ldb;
  g.ldc = t.n;
  g.stride_c = c_item;
  g.outer_stride_c = t.batch * c_item;
  g.batch = t.batch;
  g.groups = t.groups;
  std::vector<float> expected = c;
  g.c = expected.data();
  reference_matmul(g, expected);
  g.c = c.data();
  cpu().batched_matmul(nullptr, g);
  for (std::size_t i = 0; i < c.size(); ++i) {
    EXPECT_NEAR(c[i], expected[i], 1e-5 * (1.0 + std::abs(expected[i]))) << "element " << i;
  }
}

TEST(BatchedMatmul, MatchesLoopsForEveryTransposeAndLayout) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      check_case({ta, tb, 5, 3, 4, 3, 2, 1.0f, 0.0f});
      check_case({ta, tb, 1, 7, 2, 1, 1, 0.5f, 0.0f});     // one item
      check_case({ta, tb, 4, 4, 6, 2, 3, -1.5f, 1.0f});    // accumulate into C
      check_case({ta, tb, 33, 40, 70, 4, 2, 1.0f, 0.5f});  // larger than a register block
    }
  }
  // Items big enough to take the serial path with OpenBLAS's threads.
  check_case({false, true, 200, 180, 150, 2, 1, 0.25f, 0.0f});
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
  std::vector<float> y = x;
  cpu().rope(nullptr, Rotation::Forward, y.data(), y.data(), rows, seq, heads, dim, 1000, 10000.0f);
  EXPECT_NE(y, x);
  cpu().rope(nullptr, Rotation::Inverse, y.data(), y.data(), rows, seq, heads, dim, 1000, 10000.0f);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-6) << i;
}

}  // namespace
}  // namespace noeira
