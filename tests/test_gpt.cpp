// The GPT (nn/gpt.hpp): nanoGPT's names, the tied table visited once with the gradient of both
// uses (finite differences over every parameter, batch 1 and odd lengths), the KV cache giving
// the logits of a full recomputation, and a sequence longer than the block refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "distributed/units.hpp"
#include "gradcheck.hpp"
#include "nn/gpt.hpp"
#include "train/generate.hpp"

namespace noeira {
namespace {

using Small = Gpt<GptShape{11, 8, 2, 2, 8}>;

Init small_init() { return Init(Target::Cpu, InitSpec{InitKind::Normal, 0.0f, 0.2f, 3}); }

Tensor ids(std::int64_t batch, std::int64_t seq, std::uint32_t seed) {
  std::vector<std::int32_t> v;
  for (std::int64_t i = 0; i < batch * seq; ++i) {
    v.push_back(static_cast<std::int32_t>((i * 7 + seed * 3 + i / 3) % 11));
  }
  return Tensor::from_host_ids({batch, seq}, v);
}

TEST(Gpt, WalkHasNanoGptNamesAndTheTiedTableOnce) {
  Small model(small_init());
  std::vector<std::string> names;
  for_each_param(model, [&](const std::string& n, Param&) { names.push_back(n); });
  ASSERT_EQ(names.size(), 1u + 2u * 12u + 3u);
  EXPECT_EQ(names.front(), "wpe.weight");
  EXPECT_EQ(names[1], "h.0.ln_1.weight");
  EXPECT_EQ(names[3], "h.0.attn.qkv.weight");
  EXPECT_EQ(names[7], "h.0.ln_2.weight");
  EXPECT_EQ(names[9], "h.0.mlp.0.weight");
  EXPECT_EQ(names[12], "h.0.mlp.1.bias");
  EXPECT_EQ(names[25], "ln_f.weight");
  EXPECT_EQ(names.back(), "lm_head.weight");
  const dist::WalkUnits walk = dist::walk_units(model);
  EXPECT_TRUE(walk.marked);
  EXPECT_EQ(walk.unit_params.size(), 4u) << "embeddings, two blocks, the head";
  ASSERT_EQ(walk.borrowed[0].size(), 1u);
  EXPECT_EQ(walk.borrowed[0][0], walk.params.back().param) << "the embedding borrows lm_head";
}

// GPT-2's initialization: the projections into the residual stream (attn.proj, mlp.1) at the
// spec's std / √(2·layers), every other matrix at the spec's std.
TEST(Gpt, ResidualProjectionsStartAtGpt2sScaledStd) {
  using Deep = Gpt<GptShape{64, 8, 8, 2, 64}>;
  Deep model(Init(Target::Cpu, InitSpec{InitKind::Normal, 0.0f, 0.02f, 5}));
  std::int64_t checked = 0;
  for_each_param(model, [&](const std::string& n, Param& p) {
    if (!n.ends_with(".weight") || p.val.rank() != 2 || n.find("ln_") != std::string::npos) return;
    const std::vector<float> v = p.val.to_host<float>();
    double sum2 = 0;
    for (float x : v) sum2 += static_cast<double>(x) * x;
    const double std = std::sqrt(sum2 / static_cast<double>(v.size()));
    const bool residual = n.ends_with(".attn.proj.weight") || n.ends_with(".mlp.1.weight");
    const double want = residual ? 0.02 / std::sqrt(2.0 * 8) : 0.02;
    EXPECT_NEAR(std, want, 0.06 * want) << n;
    ++checked;
  });
  EXPECT_EQ(checked, 8 * 4 + 2);  // four matrices per block, wpe and the tied table
}

TEST(Gpt, EveryParameterMatchesFiniteDifferences) {
  Small model(small_init());
  // Tables of N(0, 0.02) put the LayerNorms' inputs where they curve sharply (their scale is
  // 1/σ): finite differences at a sensible eps need values of order one, as trained ones are.
  std::uint32_t seed = 100;
  for_each_param(model, [&](const std::string&, Param& p) {
    p.val.copy_from(testing::random_values(static_cast<std::size_t>(p.numel()), seed++, -0.6f, 0.6f));
  });
  testing::GradCheckOptions o;
  o.check_input = false;
  o.max_checked_per_tensor = 8;
  testing::gradcheck(model, ids(1, 5, 1), o);
  testing::gradcheck(model, ids(2, 7, 2), o);
}

TEST(Gpt, TheCacheGivesTheLogitsOfARecomputation) {
  Small model(small_init());
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor sequence = ids(2, 8, 4);
  const std::vector<float> full = model.forward(ctx, sequence).to_vector();
  GptCache cache;
  model.reset_cache(cache, Target::Cpu, 2, 8);
  // A prompt of three tokens, then one token at a time.
  std::vector<float> cached(full.size());
  auto feed = [&](std::int64_t from, std::int64_t to) {
    std::vector<std::int32_t> chunk;
    const std::vector<std::int32_t> all = sequence.to_ids();
    for (std::int64_t b = 0; b < 2; ++b) {
      for (std::int64_t t = from; t < to; ++t) chunk.push_back(all[static_cast<std::size_t>(b * 8 + t)]);
    }
    const std::vector<float> y =
        model.forward_cached(ctx, Tensor::from_host_ids({2, to - from}, chunk), cache).to_vector();
    for (std::int64_t b = 0; b < 2; ++b) {
      for (std::int64_t t = from; t < to; ++t) {
        for (std::int64_t v = 0; v < 11; ++v) {
          cached[static_cast<std::size_t>((b * 8 + t) * 11 + v)] =
              y[static_cast<std::size_t>((b * (to - from) + t - from) * 11 + v)];
        }
      }
    }
  };
  feed(0, 3);
  for (std::int64_t t = 3; t < 8; ++t) feed(t, t + 1);
  for (std::size_t i = 0; i < full.size(); ++i) {
    ASSERT_NEAR(cached[i], full[i], 1e-5 + 1e-5 * std::fabs(full[i])) << "logit " << i;
  }
}

TEST(Gpt, ASequenceLongerThanTheBlockIsRefused) {
  Small model(small_init());
  Context ctx = Context::for_target(Target::Cpu);
  try {
    model.forward(ctx, ids(1, 9, 1));
    FAIL() << "9 tokens accepted by a block of 8";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("exceed the block size 8"), std::string::npos) << e.what();
  }
}

TEST(Generate, SamplingIsDeterministicAndHonoursTopKAndTemperature) {
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.9f, -5.0f};
  EXPECT_EQ(sample_token(logits, 5, 0.0, 0, 1, 0), 1) << "temperature 0 is the argmax";
  EXPECT_EQ(sample_token(logits, 4, 1.0, 1, 7, 3), 1) << "top-1 is the argmax";
  std::vector<int> counts(5, 0);
  for (std::uint64_t d = 0; d < 2000; ++d) {
    const std::int32_t t = sample_token(logits, 5, 1.0, 2, 9, d);
    ASSERT_TRUE(t == 1 || t == 3) << "top-2 keeps ids 1 and 3 only, got " << t;
    ++counts[static_cast<std::size_t>(t)];
    EXPECT_EQ(sample_token(logits, 5, 1.0, 2, 9, d), t) << "the same draw, the same token";
  }
  // p(1) / p(3) = e^0.1: about 52.5% of the draws.
  EXPECT_NEAR(counts[1] / 2000.0, std::exp(0.1) / (1 + std::exp(0.1)), 0.04);
  // The padded vocabulary's rows beyond the tokenizer's are never drawn.
  for (std::uint64_t d = 0; d < 200; ++d) EXPECT_LT(sample_token(logits, 3, 5.0, 0, 2, d), 3);
}

TEST(Generate, SameSeedSameTokensOtherSeedOtherTokens) {
  Small model(small_init());
  Context ctx = Context::for_target(Target::Cpu);
  const std::vector<std::int32_t> prompt = {1, 2, 3};
  // 20 tokens past a block of 8: the cache is refilled on the way.
  const auto a = generate_ids(model, ctx, prompt, 20, 11, 1.0, 0, 5);
  const auto b = generate_ids(model, ctx, prompt, 20, 11, 1.0, 0, 5);
  const auto c = generate_ids(model, ctx, prompt, 20, 11, 1.0, 0, 6);
  EXPECT_EQ(a.size(), 20u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

}  // namespace
}  // namespace noeira
