#include "loss/cross_entropy.hpp"

#include "loss/checks.hpp"

namespace noeira {

namespace {
constexpr const char* kName = "CrossEntropyLoss";
}  // namespace

double CrossEntropyLoss::forward_backward(Context& ctx, const Tensor& logits,
                                          const Tensor& labels, float grad_scale) {
  loss_checks::matrix(ctx, logits, kName, "logits");
  grad_.resize(logits.shape(), ctx.target);
  return run(ctx, logits, labels, grad_.data(), grad_scale);
}

double CrossEntropyLoss::forward(Context& ctx, const Tensor& logits, const Tensor& labels) {
  return run(ctx, logits, labels, nullptr, 0.0f);
}

double CrossEntropyLoss::run(Context& ctx, const Tensor& logits, const Tensor& labels,
                             float* grad, float grad_scale) {
  loss_checks::matrix(ctx, logits, kName, "logits");
  const std::int64_t rows = logits.dim(0);
  const std::int64_t classes = logits.dim(1);
  loss_checks::labels(ctx, labels, rows, classes, kName);
  row_loss_.resize({rows}, ctx.target);
  RowLossArgs args;
  args.row_loss = row_loss_.data();
  args.grad = grad;
  args.pred = logits.data();
  args.labels = labels.ids();
  args.rows = rows;
  args.cols = classes;
  args.grad_scale = grad_scale;
  ctx.k->row_loss(ctx.stream, LossKind::CrossEntropy, args);
  // The table's sum has a fixed order: the same total for any thread count.
  return ctx.k->sum(ctx.stream, row_loss_.data(), rows);
}

}  // namespace noeira
