#include "loss/sequence_cross_entropy.hpp"

#include <vector>

#include "kernels/error.hpp"

namespace noeira {

namespace {
constexpr const char* kName = "SequenceCrossEntropyLoss";
}  // namespace

SequenceCrossEntropyLoss::SequenceCrossEntropyLoss(SequenceCrossEntropyOptions options)
    : ignore_index_(options.ignore_index), rows_(options.ignore_index) {}

SequenceCrossEntropyLoss::Flat SequenceCrossEntropyLoss::flatten(const Context& ctx,
                                                                 const Tensor& logits,
                                                                 const Tensor& labels) const {
  if (!logits.defined() || logits.rank() != 3 || logits.numel() <= 0 ||
      logits.dtype() != DType::F32) {
    throw InputError(detail::concat(
        kName, ": logits must be a non-empty [batch, steps, vocab] f32 tensor, got shape ",
        logits.defined() ? shape_string(logits.shape()) : "(undefined)"));
  }
  const std::int64_t batch = logits.dim(0), steps = logits.dim(1), vocab = logits.dim(2);
  if (!labels.defined() || labels.shape() != Shape{batch, steps} ||
      labels.dtype() != DType::I32) {
    throw InputError(detail::concat(
        kName, ": labels must be [", batch, ", ", steps, "] i32 for logits of shape ",
        shape_string(logits.shape()), ", got shape ",
        labels.defined() ? shape_string(labels.shape()) : "(undefined)"));
  }
  // CrossEntropyLoss checks host labels too, but can name only the flattened row.
  if (labels.target() == Target::Cpu && ctx.target == Target::Cpu) {
    const std::int32_t* host = labels.ids();
    for (std::int64_t i = 0; i < batch * steps; ++i) {
      if (host[i] != ignore_index_ && (host[i] < 0 || host[i] >= vocab)) {
        throw InputError(detail::concat(kName, ": label ", host[i], " at batch ", i / steps,
                                        ", step ", i % steps, " is outside [0, ", vocab, ")"));
      }
    }
  }
  // The targets are checked against ctx's by CrossEntropyLoss, with this loss's name.
  return {logits.view({batch * steps, vocab}), labels.view({batch * steps})};
}

std::int64_t SequenceCrossEntropyLoss::count(const Tensor& labels) const {
  std::vector<std::int32_t> downloaded;
  const std::int32_t* host = nullptr;
  if (labels.target() == Target::Cpu) {
    host = labels.ids();
  } else {
    downloaded = labels.to_ids();  // one copy per call: the host waits for the device here
    host = downloaded.data();
  }
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < labels.numel(); ++i) n += host[i] != ignore_index_ ? 1 : 0;
  return n;
}

void SequenceCrossEntropyLoss::forward_backward(Context& ctx, const Tensor& logits,
                                                const Tensor& labels, std::int64_t count,
                                                double* loss_sum) {
  const Flat flat = flatten(ctx, logits, labels);
  // Nothing counts: every row is ignored, so its gradient is zero whatever the scale.
  const float scale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
  rows_.forward_backward(ctx, flat.logits, flat.labels, scale, loss_sum);
  grad_ = rows_.grad().view(logits.shape());
}

void SequenceCrossEntropyLoss::forward(Context& ctx, const Tensor& logits, const Tensor& labels,
                                       double* loss_sum) {
  const Flat flat = flatten(ctx, logits, labels);
  rows_.forward(ctx, flat.logits, flat.labels, loss_sum);
}

double SequenceCrossEntropyLoss::forward_backward(Context& ctx, const Tensor& logits,
                                                  const Tensor& labels) {
  const Flat flat = flatten(ctx, logits, labels);
  const std::int64_t n = count(labels);
  const float scale = n > 0 ? 1.0f / static_cast<float>(n) : 0.0f;
  const double sum = rows_.forward_backward(ctx, flat.logits, flat.labels, scale);
  grad_ = rows_.grad().view(logits.shape());
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

double SequenceCrossEntropyLoss::forward(Context& ctx, const Tensor& logits,
                                         const Tensor& labels) {
  const Flat flat = flatten(ctx, logits, labels);
  const std::int64_t n = count(labels);
  const double sum = rows_.forward(ctx, flat.logits, flat.labels);
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

}  // namespace noeira
