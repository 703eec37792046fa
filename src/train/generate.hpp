#pragma once
// `noeira generate`: text from a trained language model (model.h5 or a checkpoint), decoded with
// the vocabulary stored beside its parameters, so no corpus is needed.
//
// From a GPT each new token costs O(T): the model runs on the new token only, attending over a
// KV cache of what came before (Gpt::forward_cached). When the sequence outgrows the model's
// block, the cache is refilled from the last block/2 tokens, as a cropped context would be. A
// recurrent LM reruns its last `block` tokens (the window it was trained on) from the zero state
// for every new token. Sampling: the
// last position's logits / temperature, the top_k largest kept (0: all), softmax in double, and
// one uniform draw per token from the counter-based RNG at (seed, token index): the same seed
// gives the same text, on any machine. Temperature 0 takes the most likely token.
#include <concepts>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/philox.hpp"
#include "nn/gpt.hpp"
#include "nn/recurrent_lm.hpp"

namespace noeira {

struct GenerateConfig {
  std::string params;      // model.h5
  std::string checkpoint;  // or a checkpoint
  std::string model;       // preset; empty: the one the file names
  std::string prompt = "\n";
  std::int64_t tokens = 200;
  double temperature = 1.0;
  std::int64_t top_k = 0;
  std::uint64_t seed = 1;
  Target device = Target::Cpu;
};

// The prompt and the generated continuation, as text.
std::string run_generate(const GenerateConfig& config);

// The next token from one row of logits (host memory); `draw` is the token's index for the RNG.
std::int32_t sample_token(const std::vector<float>& logits, std::int64_t vocab_size,
                          double temperature, std::int64_t top_k, std::uint64_t seed,
                          std::uint64_t draw);

// `count` tokens after `prompt` (ids; not empty) from a GPT, with the rules above.
template <GptShape S>
std::vector<std::int32_t> generate_ids(Gpt<S>& model, Context& ctx,
                                       const std::vector<std::int32_t>& prompt,
                                       std::int64_t count, std::int64_t vocab_size,
                                       double temperature, std::int64_t top_k,
                                       std::uint64_t seed) {
  std::vector<std::int32_t> ids = prompt;
  GptCache cache;
  model.reset_cache(cache, ctx.target, 1, S.block);
  // Feeds ids [from, end) through the cache; returns the last position's logits.
  auto feed = [&](std::size_t from) {
    const std::vector<std::int32_t> chunk(ids.begin() + static_cast<std::ptrdiff_t>(from),
                                          ids.end());
    const Tensor input = Tensor::from_host_ids({1, static_cast<std::int64_t>(chunk.size())},
                                               chunk, ctx.target);
    const Tensor& logits = model.forward_cached(ctx, input, cache);
    return logits.view({S.vocab}, (static_cast<std::int64_t>(chunk.size()) - 1) * S.vocab)
        .to_vector();
  };
  auto refill = [&] {
    for (KvCache& c : cache.layers) c.clear();
    return feed(ids.size() > static_cast<std::size_t>(S.block / 2) ? ids.size() - S.block / 2 : 0);
  };
  std::vector<float> logits = ids.size() > static_cast<std::size_t>(S.block) ? refill() : feed(0);
  for (std::int64_t i = 0; i < count; ++i) {
    ids.push_back(sample_token(logits, vocab_size, temperature, top_k, seed,
                               static_cast<std::uint64_t>(i)));
    if (i + 1 == count) break;
    logits = cache.length() < S.block ? feed(ids.size() - 1) : refill();
  }
  return std::vector<std::int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                                   ids.end());
}

// The same from any other language model (a recurrent LM, a program's own transformer), which
// has no cache: each token reruns the last `block` ids.
template <class M>
  requires requires {
    { M::vocab } -> std::convertible_to<std::int64_t>;
    { M::block } -> std::convertible_to<std::int64_t>;
  }
std::vector<std::int32_t> generate_ids(M& model, Context& ctx,
                                       const std::vector<std::int32_t>& prompt,
                                       std::int64_t count, std::int64_t vocab_size,
                                       double temperature, std::int64_t top_k,
                                       std::uint64_t seed) {
  std::vector<std::int32_t> ids = prompt;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::size_t from = ids.size() > static_cast<std::size_t>(M::block)
                                 ? ids.size() - static_cast<std::size_t>(M::block)
                                 : 0;
    const std::vector<std::int32_t> window(ids.begin() + static_cast<std::ptrdiff_t>(from),
                                           ids.end());
    const std::int64_t length = static_cast<std::int64_t>(window.size());
    const Tensor input = Tensor::from_host_ids({1, length}, window, ctx.target);
    const std::vector<float> logits =
        model.forward(ctx, input).view({M::vocab}, (length - 1) * M::vocab).to_vector();
    ids.push_back(sample_token(logits, vocab_size, temperature, top_k, seed,
                               static_cast<std::uint64_t>(i)));
  }
  return std::vector<std::int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                                   ids.end());
}

}  // namespace noeira
