#include "train/generate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/error.hpp"
#include "train/model_catalogue.hpp"
#include "train/run.hpp"
#include "train/run_data.hpp"
#include "train/saved_model.hpp"
#include "train/tokenizer.hpp"

namespace noeira {

namespace {
// The RNG stream of sampling, apart from initialization's, dropout's and the windows'.
constexpr std::uint64_t kSampleStream = 0x67656E65726174ull;  // "generat"
}  // namespace

std::int32_t sample_token(const std::vector<float>& logits, std::int64_t vocab_size,
                          double temperature, std::int64_t top_k, std::uint64_t seed,
                          std::uint64_t draw) {
  NOEIRA_CHECK(vocab_size > 0 && vocab_size <= static_cast<std::int64_t>(logits.size()),
               "sample_token: a vocabulary of ", vocab_size, " for ", logits.size(), " logits");
  // Only the tokenizer's ids: a padded vocabulary's extra rows are never produced.
  std::vector<std::int32_t> order(static_cast<std::size_t>(vocab_size));
  std::iota(order.begin(), order.end(), 0);
  // Largest first, ties to the lower id: the same order on every machine.
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)];
  });
  if (!(temperature > 0.0)) return order.front();
  if (top_k > 0 && top_k < vocab_size) order.resize(static_cast<std::size_t>(top_k));
  const double top = logits[static_cast<std::size_t>(order.front())];
  std::vector<double> weights;
  weights.reserve(order.size());
  double total = 0.0;
  for (std::int32_t id : order) {
    const double w = std::exp((logits[static_cast<std::size_t>(id)] - top) / temperature);
    weights.push_back(w);
    total += w;
  }
  const philox::Block b = philox::at(seed, kSampleStream, draw);
  // A uniform in [0, 1) from 53 random bits.
  const double u =
      static_cast<double>((static_cast<std::uint64_t>(b.v[0]) << 21) ^ (b.v[1] >> 11)) /
      9007199254740992.0;
  double acc = 0.0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    acc += weights[i] / total;
    if (u < acc) return order[i];
  }
  return order.back();  // rounding left u just above the last cumulative weight
}

std::string run_generate(const GenerateConfig& g) {
  if (g.tokens < 0) throw InputError(detail::concat("--tokens must be >= 0, got ", g.tokens));
  if (!(g.temperature >= 0.0) || !std::isfinite(g.temperature)) {
    throw InputError(detail::concat("--temperature must be >= 0, got ", g.temperature));
  }
  if (g.top_k < 0) throw InputError(detail::concat("--top-k must be >= 0, got ", g.top_k));
  TrainConfig cfg;
  cfg.params = g.params;
  cfg.eval_checkpoint = g.checkpoint;
  cfg.model = g.model;
  cfg.device = g.device;
  const Target target = run_target(cfg);
  SavedModel saved = SavedModel::open(cfg);
  if (saved.vocabulary().empty()) {
    throw InputError(detail::concat(saved.source(),
                                    ": stores no vocabulary (not a language model)"));
  }
  const Tokenizer tokenizer = Tokenizer::from_text(saved.vocabulary());
  const std::vector<std::int32_t> prompt = tokenizer.encode(g.prompt);
  if (prompt.empty()) throw InputError("--prompt is empty: give at least one character");
  cfg.model = saved.model();
  const ModelEntry& entry = model_catalogue().find(cfg.model);
  if (entry.generate == nullptr) {
    throw InputError(detail::concat("model '", cfg.model, "' is not a language model"));
  }
  return entry.generate(g, cfg, target, saved, tokenizer, prompt);
}

}  // namespace noeira
