// The attention leaves against finite differences (every input and parameter; batch 1, odd
// lengths, grouped-query heads, causal and padding masks, RoPE on and off), and their masks,
// layouts and errors against closed forms. The KV cache is tests/test_attention_cache.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attention_util.hpp"
#include "gradcheck.hpp"
#include "leaf_util.hpp"
#include "nn/cross_attention.hpp"
#include "nn/repeat_kv.hpp"
#include "nn/rope.hpp"
#include "nn/sdpa.hpp"
#include "nn/self_attention.hpp"

namespace noeira {
namespace {

using testing::gradcheck;
using testing::gradcheck_inputs;
using testing::kAttentionInit;
using testing::key_lengths;
using testing::randomize_weights;
using testing::sequence_input;

template <std::int64_t H, std::int64_t D, Masking Mask>
void check_sdpa(std::int64_t batch, std::int64_t tq, std::int64_t tk,
                const std::vector<std::int32_t>& lengths = {}) {
  SCOPED_TRACE("heads " + std::to_string(H) + " dim " + std::to_string(D) + " batch " +
               std::to_string(batch) + " tq " + std::to_string(tq) + " tk " + std::to_string(tk));
  ScaledDotProductAttention<H, D, Mask> sdpa(kAttentionInit);
  const Tensor len = lengths.empty() ? Tensor() : key_lengths(lengths);
  const std::uint32_t seed = static_cast<std::uint32_t>(batch * 100 + tq * 10 + tk);
  gradcheck_inputs(sdpa,
                   {sequence_input(batch, tq, H * D, seed, Target::Cpu, -2.0f, 2.0f),
                    sequence_input(batch, tk, H * D, seed + 1, Target::Cpu, -2.0f, 2.0f),
                    sequence_input(batch, tk, H * D, seed + 2)},
                   [&](Context& ctx, const std::vector<Tensor>& in) -> const Tensor& {
                     if (len.defined()) return sdpa.forward(ctx, in[0], in[1], in[2], len);
                     return sdpa.forward(ctx, in[0], in[1], in[2]);
                   });
}

TEST(Sdpa, GradientsMatchFiniteDifferences) {
  check_sdpa<1, 3, Masking::None>(1, 1, 1);
  check_sdpa<2, 3, Masking::Causal>(1, 5, 5);
  check_sdpa<3, 2, Masking::None>(2, 3, 5);
  check_sdpa<2, 4, Masking::None>(3, 3, 5, {5, 2, 1});   // padding
  check_sdpa<2, 2, Masking::Causal>(2, 7, 7, {7, 3});    // causal and padding
  check_sdpa<2, 3, Masking::Causal>(2, 2, 5);            // new queries after cached keys
}

// With q = 0 every visible key scores the same: each output row is the mean of the values its
// query sees, which pins the masks exactly.
TEST(Sdpa, MasksSelectTheVisibleKeys) {
  constexpr std::int64_t T = 5, D = 2;
  ScaledDotProductAttention<1, D, Masking::Causal> causal(kAttentionInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor q({2, T, D});
  const Tensor k = sequence_input(2, T, D, 3);
  const Tensor v = sequence_input(2, T, D, 4);
  const std::vector<float> vv = v.to_vector();
  const Tensor len = key_lengths({5, 2});
  const std::vector<float> y = causal.forward(ctx, q, k, v, len).to_vector();
  for (std::int64_t b = 0; b < 2; ++b) {
    for (std::int64_t i = 0; i < T; ++i) {
      const std::int64_t n = std::min<std::int64_t>(i + 1, b == 0 ? 5 : 2);
      for (std::int64_t d = 0; d < D; ++d) {
        double mean = 0.0;
        for (std::int64_t j = 0; j < n; ++j) mean += vv[(b * T + j) * D + d];
        EXPECT_NEAR(y[(b * T + i) * D + d], mean / static_cast<double>(n), 1e-6)
            << "b " << b << " i " << i << " d " << d;
      }
    }
  }
  // The probabilities are 0 exactly where masked.
  const std::vector<float> p = causal.probabilities().to_vector();
  for (std::int64_t b = 0; b < 2; ++b) {
    for (std::int64_t i = 0; i < T; ++i) {
      for (std::int64_t j = 0; j < T; ++j) {
        const bool visible = j <= i && j < (b == 0 ? 5 : 2);
        if (!visible) {
          EXPECT_EQ(p[(b * T + i) * T + j], 0.0f);
        }
      }
    }
  }
}

TEST(Sdpa, AQueryThatSeesNoKeyGivesZeros) {
  ScaledDotProductAttention<2, 2, Masking::None> sdpa(kAttentionInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor q = sequence_input(2, 3, 4, 1);
  const Tensor k = sequence_input(2, 4, 4, 2);
  const Tensor v = sequence_input(2, 4, 4, 3);
  const std::vector<float> y = sdpa.forward(ctx, q, k, v, key_lengths({0, 4})).to_vector();
  for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(y[i], 0.0f) << i;
  for (std::size_t i = 12; i < 24; ++i) EXPECT_TRUE(std::isfinite(y[i]) && y[i] != 0.0f) << i;
}

TEST(Sdpa, RejectsBadShapesAndLengths) {
  ScaledDotProductAttention<2, 3, Masking::None> sdpa(kAttentionInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor q = sequence_input(2, 3, 6, 1);
  const Tensor k = sequence_input(2, 4, 6, 2);
  EXPECT_THROW(sdpa.forward(ctx, q, k, sequence_input(2, 3, 6, 3)), InputError);  // v's length
  EXPECT_THROW(sdpa.forward(ctx, q, sequence_input(1, 4, 6, 2), k), InputError);  // batch
  EXPECT_THROW(sdpa.forward(ctx, Tensor({6, 6}), k, k), InputError);               // rank 2
  EXPECT_THROW(sdpa.forward(ctx, sequence_input(2, 3, 5, 1), k, k), InputError);  // width
  EXPECT_THROW(sdpa.forward(ctx, q, k, k, key_lengths({1, 5})), InputError);      // > tk
  EXPECT_THROW(sdpa.forward(ctx, q, k, k, key_lengths({1})), InputError);         // [batch]
  try {
    sdpa.forward(ctx, sequence_input(2, 3, 5, 1), k, k);
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ScaledDotProductAttention"), std::string::npos);
  }
}

TEST(RoPE, GradientsMatchFiniteDifferences) {
  RoPE<3, 4> halves(kAttentionInit);
  gradcheck(halves, sequence_input(1, 5, 12, 1));
  gradcheck(halves, sequence_input(2, 3, 12, 2));
  RoPE<3, 4, 10000, RopePairs::Interleaved> interleaved(kAttentionInit);
  gradcheck(interleaved, sequence_input(2, 3, 12, 2));
}

// Position p turns pair i — elements (i, i + d/2) by default, (2i, 2i+1) interleaved — by
// p · base^(-2i/d): the dot product of a rotated query and key depends only on the distance of
// their positions, and position 0 is the identity.
template <RopePairs Pairs>
void check_rotation() {
  constexpr std::int64_t D = 8;
  RoPE<1, D, 10000, Pairs> rope(kAttentionInit);
  Context ctx = Context::for_target(Target::Cpu);
  const std::vector<float> one = testing::random_values(D, 5);
  std::vector<float> rows;
  for (int t = 0; t < 6; ++t) rows.insert(rows.end(), one.begin(), one.end());
  const Tensor x = Tensor::from_host({1, 6, D}, rows);
  const std::vector<float> y = rope.forward_at(ctx, x, 3).to_vector();
  const bool interleaved = Pairs == RopePairs::Interleaved;
  for (std::int64_t t = 0; t < 6; ++t) {
    for (std::int64_t i = 0; i < D / 2; ++i) {
      const std::int64_t first = interleaved ? 2 * i : i;
      const std::int64_t second = interleaved ? 2 * i + 1 : i + D / 2;
      const double angle = static_cast<double>(3 + t) * std::pow(10000.0, -2.0 * i / D);
      const double x0 = one[first], x1 = one[second];
      EXPECT_NEAR(y[t * D + first], x0 * std::cos(angle) - x1 * std::sin(angle), 1e-6);
      EXPECT_NEAR(y[t * D + second], x0 * std::sin(angle) + x1 * std::cos(angle), 1e-6);
    }
  }
  auto dot = [&](std::int64_t a, std::int64_t b) {
    double s = 0.0;
    for (std::int64_t d = 0; d < D; ++d) s += static_cast<double>(y[a * D + d]) * y[b * D + d];
    return s;
  };
  EXPECT_NEAR(dot(0, 2), dot(3, 5), 1e-5);
  EXPECT_NEAR(dot(1, 4), dot(2, 5), 1e-5);
  const std::vector<float> at0 = rope.forward(ctx, x).to_vector();
  for (std::int64_t d = 0; d < D; ++d) EXPECT_EQ(at0[d], one[d]);
}

TEST(RoPE, RotatesSplitHalvesByPositionAndKeepsRelativeDistance) {
  check_rotation<RopePairs::SplitHalves>();
}

TEST(RoPE, RotatesInterleavedPairsByPositionAndKeepsRelativeDistance) {
  check_rotation<RopePairs::Interleaved>();
}

TEST(RepeatKV, CopiesEachKvHeadToItsGroupAndSumsBack) {
  RepeatKV<2, 6, 2> repeat(kAttentionInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = Tensor::from_host({1, 1, 4}, std::vector<float>{1, 2, 3, 4});
  EXPECT_EQ(repeat.forward(ctx, x).to_vector(),
            (std::vector<float>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  const Tensor dy = Tensor::from_host({1, 1, 12}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9,
                                                                      10, 11, 12});
  EXPECT_EQ(repeat.vjp(ctx, dy, InputGrad::Compute).to_vector(),
            (std::vector<float>{9, 12, 27, 30}));
  gradcheck(repeat, sequence_input(2, 3, 4, 9));
  RepeatKV<1, 3, 3> one_kv(kAttentionInit);
  gradcheck(one_kv, sequence_input(1, 5, 3, 10));
}

template <class M>
void check_self_attention(std::int64_t batch, std::int64_t seq) {
  SCOPED_TRACE("batch " + std::to_string(batch) + " seq " + std::to_string(seq));
  M m(kAttentionInit);
  randomize_weights(m, 31);
  gradcheck(m, sequence_input(batch, seq, M::in_dim, 17 + static_cast<std::uint32_t>(seq)));
}

TEST(SelfAttention, GradientsMatchFiniteDifferences) {
  check_self_attention<SelfAttention<6, 2>>(1, 5);                            // causal
  check_self_attention<SelfAttention<6, 3, 3, Masking::None>>(2, 3);          // bidirectional
  check_self_attention<SelfAttention<8, 4, 2>>(2, 3);                         // grouped
  check_self_attention<SelfAttention<6, 3, 1, Masking::Causal>>(1, 7);        // one kv head
  check_self_attention<SelfAttention<8, 2, 2, Masking::Causal, Positions::Rope>>(1, 5);
  check_self_attention<SelfAttention<12, 6, 3, Masking::Causal, Positions::Rope>>(2, 3);
}

TEST(SelfAttention, PaddedGradientsMatchFiniteDifferences) {
  SelfAttention<8, 4, 2, Masking::None, Positions::Rope> m(kAttentionInit);
  randomize_weights(m, 33);
  const Tensor len = key_lengths({5, 2, 1});
  Tensor x = sequence_input(3, 5, 8, 34);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor& y0 = m.forward(ctx, x, len);
  const std::vector<float> u = testing::random_values(static_cast<std::size_t>(y0.numel()), 35);
  const std::vector<float> dx = m.vjp(ctx, Tensor::from_host(y0.shape(), u), InputGrad::Compute)
                                    .to_vector();
  std::vector<testing::FdTarget> targets{{"input", &x, dx, 36}};
  testing::add_param_targets(m, targets, 37);
  testing::expect_finite_differences(
      targets, [&] { return testing::weighted_sum(m.forward(ctx, x, len), u); }, {});
}

TEST(SelfAttention, WalkNamesAndShapesFollowTheFusedLayout) {
  SelfAttention<8, 4, 2> m(kAttentionInit);
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for_each_param(m, [&](const std::string& name, Param& p) {
    names.push_back(name);
    shapes.push_back(p.shape());
  });
  EXPECT_EQ(names, (std::vector<std::string>{"qkv.weight", "qkv.bias", "proj.weight",
                                              "proj.bias"}));
  // C + 2 · KvHeads · (C / Heads) = 8 + 2 · 2 · 2 rows.
  EXPECT_EQ(shapes, (std::vector<Shape>{{16, 8}, {16}, {8, 8}, {8}}));
}

TEST(SelfAttention, AccumulateAddsToTheParameterGradients) {
  SelfAttention<8, 4, 2, Masking::Causal, Positions::Rope> m(kAttentionInit);
  randomize_weights(m, 3);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = sequence_input(2, 3, 8, 4);
  const Tensor dy = sequence_input(2, 3, 8, 5);
  m.forward(ctx, x);
  const std::vector<float> dx = m.vjp(ctx, dy, InputGrad::Compute).to_vector();
  const std::vector<float> once = testing::param_grad(m, "qkv.weight");
  ctx.grad_mode = GradMode::Accumulate;
  m.forward(ctx, x);
  EXPECT_EQ(m.vjp(ctx, dy, InputGrad::Compute).to_vector(), dx);  // input gradients overwrite
  const std::vector<float> twice = testing::param_grad(m, "qkv.weight");
  for (std::size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(twice[i], 2.0f * once[i]) << i;
  EXPECT_FALSE(m.vjp(ctx, dy, InputGrad::Skip).defined());
}

TEST(SelfAttention, RejectsInputsThatAreNotSequences) {
  SelfAttention<8, 2> m(kAttentionInit);
  Context ctx = Context::for_target(Target::Cpu);
  try {
    m.forward(ctx, Tensor({6, 8}));
    ADD_FAILURE() << "a rank-2 input ran";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("SelfAttention: expected the input as an f32 or bf16 "
                                         "[batch, seq, 8] tensor, got shape [6, 8]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(m.forward(ctx, sequence_input(2, 3, 7, 1)), InputError);
}

template <class M>
void check_cross_attention(std::int64_t batch, std::int64_t tq, std::int64_t tk,
                           const std::vector<std::int32_t>& lengths = {}) {
  SCOPED_TRACE("batch " + std::to_string(batch) + " tq " + std::to_string(tq) + " tk " +
               std::to_string(tk));
  M m(kAttentionInit);
  randomize_weights(m, 41);
  const Tensor len = lengths.empty() ? Tensor() : key_lengths(lengths);
  gradcheck_inputs(m,
                   {sequence_input(batch, tq, M::in_dim, 51),
                    sequence_input(batch, tk, M::memory_dim, 52)},
                   [&](Context& ctx, const std::vector<Tensor>& in) -> const Tensor& {
                     if (len.defined()) return m.forward(ctx, in[0], in[1], len);
                     return m.forward(ctx, in[0], in[1]);
                   });
}

TEST(CrossAttention, GradientsMatchFiniteDifferences) {
  check_cross_attention<CrossAttention<6, 2, 5>>(1, 3, 5);
  check_cross_attention<CrossAttention<6, 3>>(2, 5, 3, {3, 1});
  check_cross_attention<CrossAttention<8, 4, 6, 2>>(2, 3, 4, {2, 4});
}

TEST(CrossAttention, WalkNames) {
  CrossAttention<8, 4, 6, 2> m(kAttentionInit);
  EXPECT_EQ(testing::param_names(m),
            (std::vector<std::string>{"q.weight", "q.bias", "kv.weight", "kv.bias",
                                      "proj.weight", "proj.bias"}));
  EXPECT_EQ(parameter_count(m), 8 * 8 + 8 + 8 * 6 + 8 + 8 * 8 + 8);
}

TEST(CrossAttention, PaddedMemoryRowsDoNotMatter) {
  CrossAttention<6, 2, 4> m(kAttentionInit);
  randomize_weights(m, 7);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = sequence_input(1, 3, 6, 1);
  Tensor memory = sequence_input(1, 5, 4, 2);
  const Tensor len = key_lengths({3});
  const std::vector<float> y = m.forward(ctx, x, memory, len).to_vector();
  std::vector<float> mv = memory.to_vector();
  for (std::size_t i = 3 * 4; i < mv.size(); ++i) mv[i] = 100.0f;  // rows 3, 4: padding
  memory.copy_from(mv);
  EXPECT_EQ(m.forward(ctx, x, memory, len).to_vector(), y);
  EXPECT_THROW(m.forward(ctx, x, sequence_input(2, 5, 4, 2)), InputError);  // batch
}

}  // namespace
}  // namespace noeira
