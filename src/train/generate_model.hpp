#pragma once
// `noeira generate` for one language model type M (train/model_entry.hpp compiles it for each):
// the saved values in a freshly built model, then tokens sampled after the prompt.
#include <cstdint>
#include <string>
#include <vector>

#include "train/generate.hpp"
#include "train/run_data.hpp"
#include "train/saved_model.hpp"
#include "train/tokenizer.hpp"

namespace noeira {

template <Module M>
  requires LanguageModel<M>
std::string generate_with_model(const GenerateConfig& g, const TrainConfig& cfg, Target target,
                                SavedModel& saved, const Tokenizer& tokenizer,
                                const std::vector<std::int32_t>& prompt) {
  // A stored vocabulary of more ids than the model has logits is not this model's.
  if (tokenizer.vocab_size() > M::vocab) {
    throw InputError(detail::concat(saved.source(), ": its vocabulary has ",
                                    tokenizer.vocab_size(), " ids, more than model '", cfg.model,
                                    "' has rows (", M::vocab, ")"));
  }
  Context ctx = Context::for_target(target);
  ctx.mode = Mode::Eval;
  M model(model_init<M>(cfg, target));
  saved.load_into(model);
  const std::vector<std::int32_t> ids = generate_ids(
      model, ctx, prompt, g.tokens, tokenizer.vocab_size(), g.temperature, g.top_k, g.seed);
  return g.prompt + tokenizer.decode(ids);
}

}  // namespace noeira
