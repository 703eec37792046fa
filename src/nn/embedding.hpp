#pragma once
// Embedding<Vocab, Dim>: token ids (I32, any shape: [rows], [B, T]) to rows of a [Vocab, Dim]
// table; the output is the ids' shape with Dim appended ([B, T] -> [B, T, Dim]). The table is
// drawn from N(0, 0.02) whatever the network's initializer (GPT-2's choice; a Kaiming or Xavier
// scale has no meaning for a lookup), and is decayed.
//
// TiedEmbedding<Vocab, Dim> is the same lookup on a table another module owns (a GPT's token
// embedding reads its LM head's weight): the walk does not visit the table here (it is visited
// once, where it is owned) but reports it to a visitor that asks (`borrow`), and the vjp always
// ADDS to the table's gradient, because the owner — later in forward, so earlier in backward —
// has already written its own part of it.
//
// FeatureEmbedding<Features, Vocab, Dim> is the lookup for a sample of `Features` categorical
// features (a user's integer ids, train/array_dataset.hpp): [rows, Features] ids to
// [rows, Features · Dim], each feature's vector side by side, from one [Vocab, Dim] table.
// in_dim is Features, so a data set's width is checked against it like any model's.
//
// Ids have no gradient: the module belongs first in a network, whose vjp is called with
// InputGrad::Skip; asking it for an input gradient is an error. Its `input_vocab` tells the data
// loader to read a user's features as ids (core/module.hpp input_vocab_of).
#include <cstdint>
#include <string_view>

#include "core/module.hpp"

namespace noeira {

namespace detail {

// The lookup and its gradient on a table held elsewhere.
template <std::int64_t Vocab, std::int64_t Dim>
class EmbeddingLookup {
  static_assert(Vocab > 0 && Vocab <= INT32_MAX, "Embedding: ids are int32");

 public:
  const Tensor& forward(Context& ctx, const Tensor& ids, const Param& table) {
    const std::int64_t rows = check_input_rows(ctx, ids, 1, "Embedding");
    if (ids.dtype() != DType::I32) {
      throw InputError(detail::concat("Embedding: expected int32 token ids, got a tensor of shape ",
                                      shape_string(ids.shape()), " of another type"));
    }
    check_ids(ids, rows);
    ids_ = &ids;
    y_.resize(output_shape(ids.shape(), 1, Dim), ctx.target);
    ctx.k->gather_rows(ctx.stream, y_.data(), ids.ids(), table.val.data(), rows, Dim, Vocab);
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad, Param& table,
                    GradMode mode) {
    if (input_grad == InputGrad::Compute) {
      throw InputError(
          "Embedding: token ids have no gradient; the embedding must be the first module and its "
          "vjp called with InputGrad::Skip");
    }
    ctx.k->embedding_backward(ctx.stream, mode, table.grd.data(), dy.data(), ids_->ids(),
                              dy.numel() / Dim, Dim, Vocab);
    return empty_;
  }

 private:
  // On the CPU a bad id is an error here (the ids are host memory: the check is free). On CUDA
  // the ids are not downloaded, which would synchronize every forward: the data loader checked
  // them when it loaded the data, and the gather poisons the row of any id outside the table
  // (a NaN output, never a read outside it).
  static void check_ids(const Tensor& ids, std::int64_t rows) {
    if (ids.target() != Target::Cpu) return;
    const std::int32_t* host = ids.ids();
    for (std::int64_t r = 0; r < rows; ++r) {
      if (host[r] < 0 || host[r] >= Vocab) {
        throw InputError(detail::concat("Embedding: token id ", host[r], " at row ", r,
                                        " is outside the vocabulary [0, ", Vocab, ")"));
      }
    }
  }

  const Tensor* ids_ = nullptr;  // forward input, read by vjp
  Tensor y_;                     // [ids..., Dim] output
  Tensor empty_;
};

}  // namespace detail

template <std::int64_t Vocab, std::int64_t Dim>
class Embedding {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = 1;
  static constexpr std::int64_t out_dim = Dim;
  static constexpr std::int64_t vocab = Vocab;
  static constexpr std::int64_t input_vocab = Vocab;

  explicit Embedding(const Init& init)
      : weight_(init.normal("weight", {Vocab, Dim}, 0.0f, 0.02f)) {}

  const Tensor& forward(Context& ctx, const Tensor& ids) {
    return lookup_.forward(ctx, ids, weight_);
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    return lookup_.vjp(ctx, dy, input_grad, weight_, ctx.grad_mode);
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    visit(join_name(prefix, "weight"), weight_);
  }

 private:
  Param weight_;  // [Vocab, Dim] table
  detail::EmbeddingLookup<Vocab, Dim> lookup_;
};

template <std::int64_t Features, std::int64_t Vocab, std::int64_t Dim>
class FeatureEmbedding : public Embedding<Vocab, Dim> {
  static_assert(Features > 0 && Dim > 0, "FeatureEmbedding: features and width must be positive");

 public:
  static constexpr std::int64_t in_dim = Features;
  static constexpr std::int64_t out_dim = Features * Dim;

  using Embedding<Vocab, Dim>::Embedding;

  // The table's vjp and parameter are the Embedding's: only the output's shape differs.
  const Tensor& forward(Context& ctx, const Tensor& ids) {
    const std::int64_t rows = check_input_rows(ctx, ids, in_dim, "FeatureEmbedding");
    // The lookup's [rows, Features, Dim] is the output's [rows, Features · Dim]: a view.
    y_ = Embedding<Vocab, Dim>::forward(ctx, ids).view({rows, out_dim});
    return y_;
  }

 private:
  Tensor y_;  // view of the lookup's output
};

template <std::int64_t Vocab, std::int64_t Dim>
class TiedEmbedding {
 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = 1;
  static constexpr std::int64_t out_dim = Dim;
  static constexpr std::int64_t vocab = Vocab;

  explicit TiedEmbedding(const Init&) {}

  // The owner's [Vocab, Dim] table; set once, before the first forward (and before a parameter
  // store adopts the walk, which must see the borrow).
  void tie(Param& table) {
    NOEIRA_CHECK(table.shape() == (Shape{Vocab, Dim}), "TiedEmbedding: a table of shape ",
                 shape_string(table.shape()), " for a [", Vocab, ", ", Dim, "] embedding");
    table_ = &table;
  }

  const Tensor& forward(Context& ctx, const Tensor& ids) {
    return lookup_.forward(ctx, ids, table());
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    return lookup_.vjp(ctx, dy, input_grad, table(), GradMode::Accumulate);
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view) {
    if constexpr (requires { visit.borrow(table()); }) visit.borrow(table());
  }

 private:
  Param& table() {
    NOEIRA_CHECK(table_ != nullptr, "TiedEmbedding: no table tied");
    return *table_;
  }

  Param* table_ = nullptr;  // owned elsewhere
  detail::EmbeddingLookup<Vocab, Dim> lookup_;
};

}  // namespace noeira
