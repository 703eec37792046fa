// Writes the attention leaves' weights, inputs, outputs and every gradient to one file, which
// tests/attention_torch_check.py recomputes in PyTorch (softmax(q·kᵀ/√d + mask)·v written out,
// and the self- and cross-attention blocks) and compares (ctest: tests/attention_torch.cmake).
//
// The file's format: tests/torch_case_file.hpp.
// The path is $NOEIRA_ATTENTION_CASES; without it the test writes a scratch file and removes it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attention_util.hpp"
#include "nn/cross_attention.hpp"
#include "nn/sdpa.hpp"
#include "nn/self_attention.hpp"
#include "torch_case_file.hpp"

namespace noeira {
namespace {

using testing::CaseFile;
using testing::key_lengths;
using testing::randomize_weights;
using testing::sequence_input;

nlohmann::json lengths_json(const std::vector<std::int32_t>& lengths) {
  return lengths.empty() ? nlohmann::json(nullptr) : nlohmann::json(lengths);
}

template <std::int64_t H, std::int64_t D, Masking Mask>
void sdpa_case(CaseFile& file, const std::string& name, std::int64_t batch, std::int64_t tq,
               std::int64_t tk, const std::vector<std::int32_t>& lengths) {
  ScaledDotProductAttention<H, D, Mask> sdpa(testing::kAttentionInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor q = sequence_input(batch, tq, H * D, 1, Target::Cpu, -2.0f, 2.0f);
  const Tensor k = sequence_input(batch, tk, H * D, 2, Target::Cpu, -2.0f, 2.0f);
  const Tensor v = sequence_input(batch, tk, H * D, 3);
  const Tensor dy = sequence_input(batch, tq, H * D, 4);
  const Tensor& y = lengths.empty() ? sdpa.forward(ctx, q, k, v)
                                    : sdpa.forward(ctx, q, k, v, key_lengths(lengths));
  sdpa.vjp(ctx, dy, InputGrad::Compute);
  for (const auto& [part, t] : {std::pair<const char*, const Tensor*>{"q", &q}, {"k", &k},
                                {"v", &v}, {"dy", &dy}, {"y", &y}, {"dq", &sdpa.input_grad(0)},
                                {"dk", &sdpa.input_grad(1)}, {"dv", &sdpa.input_grad(2)}}) {
    file.add(name + "/" + part, *t);
  }
  file.add_case({{"name", name}, {"kind", "sdpa"}, {"heads", H}, {"causal", Mask == Masking::Causal},
                 {"lengths", lengths_json(lengths)}});
}

template <class M>
void self_attention_case(CaseFile& file, const std::string& name, std::int64_t batch,
                         std::int64_t seq, std::int64_t kv_heads, bool causal, bool rope,
                         const std::vector<std::int32_t>& lengths = {}) {
  M m(testing::kAttentionInit);
  randomize_weights(m, 61);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = sequence_input(batch, seq, M::in_dim, 5);
  const Tensor dy = sequence_input(batch, seq, M::out_dim, 6);
  file.add(name + "/x", x);
  file.add(name + "/dy", dy);
  file.add(name + "/y", lengths.empty() ? m.forward(ctx, x)
                                        : m.forward(ctx, x, key_lengths(lengths)));
  file.add(name + "/dx", m.vjp(ctx, dy, InputGrad::Compute));
  file.add_params(name, m);
  file.add_case({{"name", name},
                 {"kind", "self_attention"},
                 {"lengths", lengths_json(lengths)},
                 {"heads", M::in_dim / M::head_dim},
                 {"kv_heads", kv_heads},
                 {"causal", causal},
                 {"rope", rope},
                 {"rope_interleaved", M::rope_pairs == RopePairs::Interleaved},
                 {"rope_base", 10000.0}});
}

template <class M>
void cross_attention_case(CaseFile& file, const std::string& name, std::int64_t batch,
                          std::int64_t tq, std::int64_t tk, std::int64_t kv_heads,
                          const std::vector<std::int32_t>& lengths) {
  M m(testing::kAttentionInit);
  randomize_weights(m, 71);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = sequence_input(batch, tq, M::in_dim, 7);
  const Tensor memory = sequence_input(batch, tk, M::memory_dim, 8);
  const Tensor dy = sequence_input(batch, tq, M::out_dim, 9);
  file.add(name + "/x", x);
  file.add(name + "/memory", memory);
  file.add(name + "/dy", dy);
  file.add(name + "/y", lengths.empty() ? m.forward(ctx, x, memory)
                                        : m.forward(ctx, x, memory, key_lengths(lengths)));
  file.add(name + "/dx", m.vjp(ctx, dy, InputGrad::Compute));
  file.add(name + "/dmemory", m.input_grad(1));
  file.add_params(name, m);
  file.add_case({{"name", name},
                 {"kind", "cross_attention"},
                 {"heads", M::in_dim / M::head_dim},
                 {"kv_heads", kv_heads},
                 {"lengths", lengths_json(lengths)}});
}

TEST(AttentionTorch, WritesTheCases) {
  CaseFile file;
  sdpa_case<3, 4, Masking::Causal>(file, "sdpa_causal", 2, 5, 5, {});
  sdpa_case<2, 8, Masking::None>(file, "sdpa_padding", 3, 4, 6, {6, 3, 1});
  // Queries after cached keys (the last 3 of 5 positions), causal and padded.
  sdpa_case<2, 4, Masking::Causal>(file, "sdpa_causal_padding_offset", 2, 3, 5, {5, 4});
  self_attention_case<SelfAttention<12, 3>>(file, "self_attention", 2, 7, 3, true, false);
  self_attention_case<SelfAttention<16, 4, 2, Masking::Causal, Positions::Rope>>(
      file, "self_attention_rope_gqa", 2, 5, 2, true, true);
  self_attention_case<SelfAttention<16, 4, 1, Masking::None, Positions::Rope>>(
      file, "self_attention_bidirectional_mqa_rope", 1, 6, 1, false, true);
  self_attention_case<SelfAttention<16, 4, 2, Masking::Causal, Positions::RopeInterleaved>>(
      file, "self_attention_rope_interleaved", 2, 5, 2, true, true);
  self_attention_case<SelfAttention<12, 2, 2, Masking::Causal, Positions::Rope>>(
      file, "self_attention_padded", 3, 5, 2, true, true, {5, 3, 1});
  cross_attention_case<CrossAttention<12, 3, 10>>(file, "cross_attention", 2, 4, 6, 3, {6, 2});
  cross_attention_case<CrossAttention<16, 4, 8, 2>>(file, "cross_attention_gqa", 1, 3, 5, 2, {});
  file.write_where_asked("NOEIRA_ATTENTION_CASES", "noeira_attention_cases");
}

}  // namespace
}  // namespace noeira
