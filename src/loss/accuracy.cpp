#include "loss/accuracy.hpp"

#include "loss/checks.hpp"

namespace noeira {

std::int64_t count_correct(Context& ctx, const Tensor& logits, const Tensor& labels) {
  loss_checks::matrix(ctx, logits, "count_correct", "logits");
  const std::int64_t rows = logits.dim(0);
  const std::int64_t classes = logits.dim(1);
  loss_checks::labels(ctx, labels, rows, classes, kNoIgnoreIndex, "count_correct");
  return ctx.k->count_correct(ctx.stream, logits.data(), labels.ids(), rows, classes);
}

}  // namespace noeira
