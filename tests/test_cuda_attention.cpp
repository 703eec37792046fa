// The attention kernels and leaves on CUDA against the CPU reference (tests/cuda_compare.hpp):
// batched_matmul over the layouts attention uses, the masked softmax, RoPE, and the SDPA,
// self-attention (with RoPE, grouped-query heads and the KV cache) and cross-attention leaves,
// forward and every gradient. Without a CUDA device every test is skipped.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "attention_util.hpp"
#include "cuda_compare.hpp"
#include "gpu_skip.hpp"
#include "nn/cross_attention.hpp"
#include "nn/kv_cache.hpp"
#include "nn/sdpa.hpp"
#include "nn/self_attention.hpp"

namespace noeira {
namespace {

using testing::expect_same_on_both;
using testing::kElementwise;
using testing::kGemm;
using testing::kReduction;
using testing::key_lengths;
using testing::Outputs;
using testing::random_on;
using testing::randomize_weights;
using testing::sequence_input;
using testing::Tol;

// Softmax, GEMMs and their gradients in another summation order.
constexpr Tol kAttention{1e-4, 1e-3};

TEST(CudaAttention, BatchedMatmulMatchesCpu) {
  NOEIRA_REQUIRE_GPU();
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      // {ta, tb, m, n, k, batch, groups, head, pad, c_gap, alpha, beta}. Heads 32 floats apart
      // (aligned), 3 floats apart (12-byte items: the alignment check), and groups that do not
      // continue the batch's stride (pad, c_gap: one launch per group).
      for (const testing::MatmulLayout& l :
           {testing::MatmulLayout{ta, tb, 17, 9, 32, 4, 3, 32, 0, 0, 0.25f, 0.0f},
            testing::MatmulLayout{ta, tb, 5, 7, 3, 2, 2, 3, 0, 0, 1.0f, 1.0f},
            testing::MatmulLayout{ta, tb, 64, 64, 64, 6, 2, 64, 8, 4, -1.0f, 0.5f}}) {
        SCOPED_TRACE(testing::describe(l));
        expect_same_on_both(
            [&](Target t) {
              testing::MatmulOperands o = testing::matmul_operands(t, l);
              kernels_for(t).batched_matmul(nullptr, o.args);
              return Outputs{{"c", o.c.to_vector()}};
            },
            kGemm);
      }
    }
  }
}

TEST(CudaAttention, MaskedSoftmaxMatchesCpu) {
  NOEIRA_REQUIRE_GPU();
  for (std::int64_t tk : {1, 7, 70, 700}) {
    SCOPED_TRACE("tk " + std::to_string(tk));
    expect_same_on_both(
        [tk](Target t) {
          const KernelTable& k = kernels_for(t);
          const std::int64_t batch = 3, heads = 2, tq = tk > 3 ? tk - 3 : tk;
          const std::int64_t n = batch * heads * tq * tk;
          const Tensor len = key_lengths({static_cast<std::int32_t>(tk), 0,
                                          static_cast<std::int32_t>((tk + 1) / 2)},
                                         t);
          Tensor x = random_on(t, {n}, 31, -8.0f, 8.0f);
          Tensor causal({n}, t);
          Tensor padded({n}, t);
          AttentionMask mask;
          mask.causal = true;
          mask.key_lengths = len.ids();
          k.masked_softmax_forward(nullptr, causal.data(), x.data(), mask, batch, heads, tq, tk);
          mask.causal = false;
          k.masked_softmax_forward(nullptr, padded.data(), x.data(), mask, batch, heads, tq, tk);
          k.masked_softmax_forward(nullptr, x.data(), x.data(), AttentionMask{}, batch, heads, tq,
                                   tk);  // in place, no mask
          return Outputs{{"causal and padded", causal.to_vector()},
                         {"padded", padded.to_vector()},
                         {"in place", x.to_vector()}};
        },
        kReduction);
  }
}

TEST(CudaAttention, RopeMatchesCpu) {
  NOEIRA_REQUIRE_GPU();
  expect_same_on_both(
      [](Target t) {
        const KernelTable& k = kernels_for(t);
        const std::int64_t rows = 3 * 37, seq = 37, heads = 3, dim = 64;
        Tensor x = random_on(t, {rows, heads * dim}, 41);
        Tensor y({rows, heads * dim}, t);
        Tensor z({rows, heads * dim}, t);
        k.rope(nullptr, Rotation::Forward, {rows, seq, heads, dim, 1000, 10000.0f}, y.data(),
               x.data());
        k.rope(nullptr, Rotation::Forward,
               {rows, seq, heads, dim, 1000, 10000.0f, RopePairs::Interleaved}, z.data(),
               x.data());
        k.rope(nullptr, Rotation::Inverse, {rows, seq, heads, dim, 5, 500.0f}, x.data(), x.data());
        return Outputs{{"forward", y.to_vector()},
                       {"forward interleaved", z.to_vector()},
                       {"inverse in place", x.to_vector()}};
      },
      kElementwise);
}

TEST(CudaAttention, SdpaLeafMatchesCpu) {
  NOEIRA_REQUIRE_GPU();
  expect_same_on_both(
      [](Target t) {
        ScaledDotProductAttention<4, 16, Masking::Causal> sdpa(testing::kAttentionInit);
        Context ctx = Context::for_target(t);
        const Tensor q = sequence_input(3, 9, 64, 1, t, -2.0f, 2.0f);
        const Tensor k = sequence_input(3, 33, 64, 2, t, -2.0f, 2.0f);
        const Tensor v = sequence_input(3, 33, 64, 3, t);
        const Tensor dy = sequence_input(3, 9, 64, 4, t);
        Outputs o{{"y", sdpa.forward(ctx, q, k, v, key_lengths({33, 20, 1}, t)).to_vector()}};
        o.emplace_back("p", sdpa.probabilities().to_vector());
        o.emplace_back("dq", sdpa.vjp(ctx, dy, InputGrad::Compute).to_vector());
        o.emplace_back("dk", sdpa.input_grad(1).to_vector());
        o.emplace_back("dv", sdpa.input_grad(2).to_vector());
        return o;
      },
      kAttention);
}

// Forward, then vjp twice (Overwrite, then Accumulate on top): output, input and parameter
// gradients.
template <class M>
Outputs run_self_attention(Target t, std::int64_t batch, std::int64_t seq) {
  M m(Init(t, testing::kAttentionInit.spec()));
  randomize_weights(m, 21);
  Context ctx = Context::for_target(t);
  const Tensor x = sequence_input(batch, seq, M::in_dim, 22, t);
  const Tensor dy = sequence_input(batch, seq, M::out_dim, 23, t);
  Outputs o{{"y", m.forward(ctx, x).to_vector()}};
  o.emplace_back("dx", m.vjp(ctx, dy, InputGrad::Compute).to_vector());
  ctx.grad_mode = GradMode::Accumulate;
  m.vjp(ctx, dy, InputGrad::Skip);
  for_each_param(m, [&](const std::string& name, Param& p) {
    o.emplace_back(name + " (grad, accumulated twice)", p.grd.to_vector());
  });
  return o;
}

TEST(CudaAttention, SelfAttentionMatchesCpu) {
  NOEIRA_REQUIRE_GPU();
  expect_same_on_both([](Target t) { return run_self_attention<SelfAttention<64, 4>>(t, 2, 33); },
                      kAttention);
  expect_same_on_both(
      [](Target t) {
        return run_self_attention<SelfAttention<96, 6, 2, Masking::Causal, Positions::Rope>>(t, 3,
                                                                                           17);
      },
      kAttention);
}

TEST(CudaAttention, CrossAttentionMatchesCpu) {
  NOEIRA_REQUIRE_GPU();
  expect_same_on_both(
      [](Target t) {
        CrossAttention<64, 4, 48, 2> m(Init(t, testing::kAttentionInit.spec()));
        randomize_weights(m, 31);
        Context ctx = Context::for_target(t);
        const Tensor x = sequence_input(2, 11, 64, 32, t);
        const Tensor memory = sequence_input(2, 19, 48, 33, t);
        const Tensor dy = sequence_input(2, 11, 64, 34, t);
        Outputs o{{"y", m.forward(ctx, x, memory, key_lengths({19, 7}, t)).to_vector()}};
        o.emplace_back("dx", m.vjp(ctx, dy, InputGrad::Compute).to_vector());
        o.emplace_back("dmemory", m.input_grad(1).to_vector());
        for_each_param(m, [&](const std::string& name, Param& p) {
          o.emplace_back(name + " (grad)", p.grd.to_vector());
        });
        return o;
      },
      kAttention);
}

TEST(CudaAttention, KvCacheMatchesCpu) {
  NOEIRA_REQUIRE_GPU();
  using M = SelfAttention<64, 8, 2, Masking::Causal, Positions::Rope>;
  expect_same_on_both(
      [](Target t) {
        M m(Init(t, testing::kAttentionInit.spec()));
        randomize_weights(m, 41);
        Context ctx = Context::for_target(t);
        KvCache cache;
        cache.reset(t, 2, 12, M::kv_width);
        Outputs o{{"prompt", m.forward_cached(ctx, sequence_input(2, 5, 64, 42, t), cache)
                                 .to_vector()}};
        for (std::uint32_t step = 0; step < 4; ++step) {
          o.emplace_back("token " + std::to_string(step),
                         m.forward_cached(ctx, sequence_input(2, 1, 64, 43 + step, t), cache)
                             .to_vector());
        }
        o.emplace_back("cached keys", cache.keys().to_vector());
        return o;
      },
      kAttention);
}

}  // namespace
}  // namespace noeira
