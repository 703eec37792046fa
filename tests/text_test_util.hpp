#pragma once
// What the text tests share: a token stream whose ids are their positions (so a window's ids
// show where it starts), and a stand-in language model small enough to reason about.
#include <cstdint>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "core/module.hpp"
#include "nn/embedding.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"
#include "train/text_windows.hpp"

namespace noeira::testing {

// Tokens 0, 1, ..., n - 1 (id = position) in a vocabulary of vocab >= n.
inline ResidentTokens counting_tokens(std::string name, std::int64_t n, std::int64_t vocab,
                                      Target target) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  return make_resident_tokens(std::move(name), ids, vocab, target);
}

// The token embedding of a window batch: [rows, T] ids read as rows · T lookups. Today's
// Embedding takes [rows] ids; the transformer's token embedding reads [B, T] itself.
template <std::int64_t T, std::int64_t V, std::int64_t C>
class WindowEmbedding {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = T;
  static constexpr std::int64_t out_dim = C;

  explicit WindowEmbedding(const Init& init) : embedding_(init) {}

  const Tensor& forward(Context& ctx, const Tensor& ids) {
    check_input_rows(ctx, ids, T, "WindowEmbedding");
    flat_ = ids.view({ids.numel()});  // kept: the embedding's vjp reads its ids
    return embedding_.forward(ctx, flat_);
  }
  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    return embedding_.vjp(ctx, dy, input_grad);
  }
  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    embedding_.for_each_param(visit, prefix);
  }

 private:
  Embedding<V, C> embedding_;
  Tensor flat_;  // [rows · T] view of the ids
};

// A bigram language model: logits [rows · T, V] from the current token alone.
template <std::int64_t T, std::int64_t V, std::int64_t C>
using BigramModel = Sequential<WindowEmbedding<T, V, C>, Linear<C, V>>;

}  // namespace noeira::testing
