// The KV cache: running sequences through SelfAttention::forward_cached a few tokens at a time
// gives the outputs of one full causal forward (within 1e-5), with RoPE at the cached positions
// and grouped-query heads; the cached path leaves the training path as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attention_util.hpp"
#include "nn/kv_cache.hpp"
#include "nn/self_attention.hpp"

namespace noeira {
namespace {

using testing::kAttentionInit;
using testing::randomize_weights;
using testing::sequence_input;

// Positions [from, from + count) of every sequence of a [batch, seq, width] host vector.
std::vector<float> positions(const std::vector<float>& x, std::int64_t batch, std::int64_t seq,
                             std::int64_t width, std::int64_t from, std::int64_t count) {
  std::vector<float> out;
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto first = x.begin() + (b * seq + from) * width;
    out.insert(out.end(), first, first + count * width);
  }
  return out;
}

// Feeds the sequence through the cache in chunks of the given sizes; every chunk's output must
// equal the full forward's rows at those positions.
template <class M>
void check_cache_matches_full_forward(const std::vector<std::int64_t>& chunks) {
  constexpr std::int64_t B = 2, C = M::in_dim;
  std::int64_t T = 0;
  for (std::int64_t c : chunks) T += c;
  M m(kAttentionInit);
  randomize_weights(m, 11);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = sequence_input(B, T, C, 12);
  const std::vector<float> full = m.forward(ctx, x).to_vector();
  const std::vector<float> xv = x.to_vector();

  KvCache cache;
  cache.reset(Target::Cpu, B, T + 2, M::kv_width);
  std::int64_t at = 0;
  for (std::int64_t count : chunks) {
    const Tensor part = Tensor::from_host({B, count, C}, positions(xv, B, T, C, at, count));
    const std::vector<float> got = m.forward_cached(ctx, part, cache).to_vector();
    const std::vector<float> want = positions(full, B, T, C, at, count);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::abs(want[i])))
          << "positions " << at << ".." << at + count << ", element " << i;
    }
    at += count;
    EXPECT_EQ(cache.length(), at);
  }
}

TEST(KvCache, TokenByTokenEqualsTheFullCausalForward) {
  const std::vector<std::int64_t> one_by_one(7, 1);
  check_cache_matches_full_forward<SelfAttention<8, 2>>(one_by_one);
  check_cache_matches_full_forward<SelfAttention<8, 4, 2, Masking::Causal, Positions::Rope>>(
      one_by_one);
  check_cache_matches_full_forward<SelfAttention<12, 6, 1, Masking::Causal, Positions::Rope>>(
      one_by_one);
}

TEST(KvCache, APromptThenSingleTokensEqualsTheFullCausalForward) {
  check_cache_matches_full_forward<SelfAttention<8, 2>>({3, 1, 1, 2});
  check_cache_matches_full_forward<SelfAttention<8, 4, 2, Masking::Causal, Positions::Rope>>(
      {4, 1, 1, 1});
  check_cache_matches_full_forward<SelfAttention<8, 2, 2, Masking::Causal, Positions::Rope>>(
      {5, 2});
}

TEST(KvCache, TheCachedPathLeavesTrainingAsItWas) {
  using M = SelfAttention<8, 4, 2, Masking::Causal, Positions::Rope>;
  M m(kAttentionInit);
  randomize_weights(m, 5);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = sequence_input(1, 5, 8, 6);
  const Tensor dy = sequence_input(1, 5, 8, 7);
  const std::vector<float> y = m.forward(ctx, x).to_vector();
  const std::vector<float> dx = m.vjp(ctx, dy, InputGrad::Compute).to_vector();
  KvCache cache;
  cache.reset(Target::Cpu, 1, 4, M::kv_width);
  m.forward_cached(ctx, sequence_input(1, 3, 8, 8), cache);
  // No vjp of a cached forward: its buffers hold inference state.
  EXPECT_THROW(m.vjp(ctx, dy, InputGrad::Compute), Error);
  EXPECT_EQ(m.forward(ctx, x).to_vector(), y);
  EXPECT_EQ(m.vjp(ctx, dy, InputGrad::Compute).to_vector(), dx);
}

TEST(KvCache, RefusesOverflowAndAMismatchedCache) {
  using M = SelfAttention<8, 4, 2>;
  M m(kAttentionInit);
  Context ctx = Context::for_target(Target::Cpu);
  KvCache cache;
  EXPECT_THROW(m.forward_cached(ctx, sequence_input(1, 1, 8, 1), cache), InputError);  // unset
  cache.reset(Target::Cpu, 1, 3, M::kv_width);
  m.forward_cached(ctx, sequence_input(1, 2, 8, 1), cache);
  try {
    m.forward_cached(ctx, sequence_input(1, 2, 8, 2), cache);
    ADD_FAILURE() << "the cache overflowed silently";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("overflow the KV cache's capacity 3"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(cache.length(), 2);
  EXPECT_THROW(m.forward_cached(ctx, sequence_input(2, 1, 8, 3), cache), InputError);  // batch
  KvCache wide;
  wide.reset(Target::Cpu, 1, 3, 8);  // the width of all heads, not of the kv heads
  EXPECT_THROW(m.forward_cached(ctx, sequence_input(1, 1, 8, 3), wide), InputError);
  cache.clear();
  EXPECT_NO_THROW(m.forward_cached(ctx, sequence_input(1, 3, 8, 4), cache));
}

}  // namespace
}  // namespace noeira
