#pragma once
// Embedding<Vocab, Dim>: token ids ([rows] or [rows, 1], I32) to rows of a [Vocab, Dim] table.
// The table is drawn from N(0, 0.02) whatever the network's initializer (GPT-2's choice; a
// Kaiming or Xavier scale has no meaning for a lookup), and is decayed.
//
// Ids have no gradient: the module belongs first in a network, whose vjp is called with
// InputGrad::Skip; asking it for an input gradient is an error.
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/module.hpp"

namespace noeira {

template <std::int64_t Vocab, std::int64_t Dim>
class Embedding {
  static_assert(Vocab > 0 && Vocab <= INT32_MAX, "Embedding: ids are int32");

 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = 1;
  static constexpr std::int64_t out_dim = Dim;
  static constexpr std::int64_t vocab = Vocab;

  explicit Embedding(const Init& init)
      : weight_(init.normal("weight", {Vocab, Dim}, 0.0f, 0.02f)) {}

  const Tensor& forward(Context& ctx, const Tensor& ids) {
    check_input_rows(ctx, ids, 1, "Embedding");
    if (ids.dtype() != DType::I32) {
      throw InputError(detail::concat("Embedding: expected int32 token ids, got a tensor of shape ",
                                      shape_string(ids.shape()), " of another type"));
    }
    check_ids(ids);
    const std::int64_t rows = ids.dim(0);
    ids_ = &ids;
    y_.resize({rows, Dim}, ctx.target);
    ctx.k->gather_rows(ctx.stream, y_.data(), ids.ids(), weight_.val.data(), rows, Dim, Vocab);
    return y_;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    if (input_grad == InputGrad::Compute) {
      throw InputError(
          "Embedding: token ids have no gradient; the embedding must be the first module and its "
          "vjp called with InputGrad::Skip");
    }
    ctx.k->embedding_backward(ctx.stream, ctx.grad_mode, weight_.grd.data(), dy.data(),
                              ids_->ids(), dy.dim(0), Dim, Vocab);
    return empty_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    visit(join_name(prefix, "weight"), weight_);
  }

 private:
  // On the CPU a bad id is an error here (the ids are host memory: the check is free). On CUDA
  // the ids are not downloaded, which would synchronize every forward: the data loader checked
  // them when it loaded the data, and the gather poisons the row of any id outside the table
  // (a NaN output, never a read outside it).
  static void check_ids(const Tensor& ids) {
    if (ids.target() != Target::Cpu) return;
    const std::int32_t* host = ids.ids();
    const std::int64_t rows = ids.dim(0);
    for (std::int64_t r = 0; r < rows; ++r) {
      if (host[r] < 0 || host[r] >= Vocab) {
        throw InputError(detail::concat("Embedding: token id ", host[r], " at row ", r,
                                        " is outside the vocabulary [0, ", Vocab, ")"));
      }
    }
  }

  Param weight_;  // [Vocab, Dim] table
  const Tensor* ids_ = nullptr;  // forward input, read by vjp
  Tensor y_;      // [rows, Dim] output
  Tensor empty_;
};

}  // namespace noeira
