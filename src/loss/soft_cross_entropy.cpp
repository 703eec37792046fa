#include "loss/soft_cross_entropy.hpp"

#include "loss/checks.hpp"

namespace noeira {

namespace {
constexpr const char* kName = "SoftCrossEntropyLoss";
}  // namespace

double SoftCrossEntropyLoss::forward_backward(Context& ctx, const Tensor& logits,
                                              const Tensor& targets, float grad_scale) {
  loss_checks::matrix(ctx, logits, kName, "logits");
  grad_.resize(logits.shape(), ctx.target);
  return run(ctx, logits, targets, grad_.data(), grad_scale);
}

double SoftCrossEntropyLoss::forward(Context& ctx, const Tensor& logits, const Tensor& targets) {
  return run(ctx, logits, targets, nullptr, 0.0f);
}

double SoftCrossEntropyLoss::run(Context& ctx, const Tensor& logits, const Tensor& targets,
                                 float* grad, float grad_scale) {
  loss_checks::same_shape(ctx, logits, targets, kName, "logits", "targets");
  const std::int64_t rows = logits.dim(0);
  const std::int64_t classes = logits.dim(1);
  row_loss_.resize({rows}, ctx.target);
  RowLossArgs args;
  args.row_loss = row_loss_.data();
  args.grad = grad;
  args.pred = logits.data();
  args.target = targets.data();
  args.rows = rows;
  args.cols = classes;
  args.grad_scale = grad_scale;
  ctx.k->row_loss(ctx.stream, LossKind::SoftCrossEntropy, args);
  return ctx.k->sum(ctx.stream, row_loss_.data(), rows);
}

}  // namespace noeira
