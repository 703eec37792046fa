#pragma once
// A recurrent language model: token ids [B, T] -> embedding -> two recurrent layers (LSTM or GRU)
// -> a linear head -> logits [B, T, vocab], the character-level model of Karpathy's char-rnn.
// It is a Sequential (walk names 0.weight, 1.weight_ih, ..., 3.bias) that also states the two
// numbers a language model's trainer reads: the vocabulary and the training window (`block`).
// Unlike a GPT's block, the window is no limit of the model: it reads sequences of any length.
// PyTorch's equivalent (train/name_map.cpp) is nn.Embedding, an nn.LSTM / nn.GRU of
// num_layers=2 with batch_first=True, and nn.Linear.
#include <cstdint>

#include "nn/embedding.hpp"
#include "nn/linear.hpp"
#include "nn/recurrent.hpp"
#include "nn/sequential.hpp"

namespace noeira {

struct RecurrentLmShape {
  std::int64_t vocab;
  std::int64_t block;   // the training window
  std::int64_t width;   // the embedding's
  std::int64_t hidden;  // each recurrent layer's
};

template <RecurrentCell Cell, RecurrentLmShape S>
class RecurrentLm
    : public Sequential<Embedding<S.vocab, S.width>, Recurrent<Cell, S.width, S.hidden>,
                        Recurrent<Cell, S.hidden, S.hidden>, Linear<S.hidden, S.vocab>> {
 public:
  static constexpr RecurrentLmShape shape = S;
  static constexpr std::int64_t vocab = S.vocab;
  static constexpr std::int64_t block = S.block;
  static constexpr RecurrentCell cell = Cell;

  using RecurrentLm::Sequential::Sequential;
};

}  // namespace noeira
