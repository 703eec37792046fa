#pragma once
// Token-level cross-entropy of a language model: the mean over the tokens that count, padding
// excluded, as torch.nn.functional.cross_entropy(logits.view(-1, V), labels.view(-1),
// ignore_index=-100) computes it. The rows are CrossEntropyLoss's; this adds the shapes and the
// count that the mean divides by.
#include <cstdint>

#include "loss/cross_entropy.hpp"

namespace noeira {

struct SequenceCrossEntropyOptions {
  std::int32_t ignore_index = -100;  // torch's default: a label that marks padding
};

// logits [batch, steps, vocab] F32, labels [batch, steps] I32, each label in [0, vocab) or the
// ignore index. A bad label on Target::Cpu is an InputError naming its (batch, step); on
// Target::Cuda it gives NaN, as CrossEntropyLoss documents.
//
// When no token counts (every label ignored) the mean is 0 and the gradient zero, where torch
// gives NaN: a batch of padding alone then leaves training untouched instead of poisoning it.
class SequenceCrossEntropyLoss {
 public:
  explicit SequenceCrossEntropyLoss(SequenceCrossEntropyOptions options = {});

  // The mean over the tokens that count, returned on the host; grad() = d(mean)/d(logits).
  // Counting needs the labels on the host: CUDA-resident labels are downloaded once per call
  // (the host waits for them). A training loop that must not wait counts once per batch and
  // calls the explicit-count forms below.
  double forward_backward(Context& ctx, const Tensor& logits, const Tensor& labels);
  double forward(Context& ctx, const Tensor& logits, const Tensor& labels);

  // Explicit count (distributed training, where the mean is over the global batch's tokens):
  // ADDS the sum over this batch's tokens to *loss_sum, one double in ctx.target's memory,
  // without waiting for the device, and writes grad() = d(sum)/d(logits) / count. count <= 0
  // (nothing counts anywhere) gives the zero gradient. Labels are not read on the host.
  void forward_backward(Context& ctx, const Tensor& logits, const Tensor& labels,
                        std::int64_t count, double* loss_sum);
  // The same sum without a gradient (evaluation); grad() keeps the last forward_backward's.
  void forward(Context& ctx, const Tensor& logits, const Tensor& labels, double* loss_sum);

  // The number of labels that are not the ignore index (what the mean divides by; a distributed
  // caller sums it over the ranks). CUDA labels are downloaded (the host waits).
  std::int64_t count(const Tensor& labels) const;

  // [batch, steps, vocab] gradient of the last forward_backward.
  const Tensor& grad() const { return grad_; }

 private:
  class Tokens : public CrossEntropyLoss {
   public:
    explicit Tokens(std::int32_t ignore_index)
        : CrossEntropyLoss({.ignore_index = ignore_index}, "SequenceCrossEntropyLoss") {}
  };

  struct Flat {
    Tensor logits;  // [batch · steps, vocab]
    Tensor labels;  // [batch · steps]
  };
  // Checks the shapes (and host labels) and returns the views CrossEntropyLoss takes.
  Flat flatten(const Context& ctx, const Tensor& logits, const Tensor& labels) const;

  std::int32_t ignore_index_;
  Tokens rows_;
  Tensor grad_;  // a [batch, steps, vocab] view of rows_'s gradient
};

}  // namespace noeira
