#include "loss/row_loss.hpp"

#include "kernels/error.hpp"
#include "loss/checks.hpp"

namespace noeira {

RowLossArgs RowLoss::inputs(const Context& ctx, const Tensor& pred, const Tensor& target) const {
  loss_checks::matrix(ctx, pred, spec_.name, spec_.pred_name);
  RowLossArgs args;
  args.pred = pred.data();
  args.rows = pred.dim(0);
  args.cols = pred.dim(1);
  switch (spec_.kind) {
    case LossKind::CrossEntropy:
      loss_checks::labels(ctx, target, args.rows, args.cols, spec_.ignore_index, spec_.name);
      args.labels = target.ids();
      args.ignore_index = spec_.ignore_index;
      break;
    case LossKind::TwoHot:
      loss_checks::bins(pred, spec_.name, spec_.pred_name);
      loss_checks::scalars(ctx, target, args.rows, spec_.name, spec_.target_name);
      args.target = target.data();
      args.bin_low = spec_.bin_low;
      args.bin_high = spec_.bin_high;
      break;
    case LossKind::GaussianNll:
      loss_checks::means_variances(ctx, pred, target, spec_.name, spec_.pred_name,
                                   spec_.target_name);
      args.target = target.data();
      args.variance_floor = spec_.variance_floor;
      break;
    case LossKind::SoftCrossEntropy:
    case LossKind::Mse:
      loss_checks::same_shape(ctx, pred, target, spec_.name, spec_.pred_name, spec_.target_name);
      args.target = target.data();
      break;
  }
  return args;
}

void RowLoss::run(Context& ctx, RowLossArgs args, double* loss_sum) {
  NOEIRA_CHECK(loss_sum != nullptr, spec_.name, ": loss_sum is null");
  row_loss_.resize({args.rows}, ctx.target);
  args.row_loss = row_loss_.data();
  ctx.k->row_loss(ctx.stream, spec_.kind, args);
  // The table's sum has a fixed order: the same total for any thread count.
  ctx.k->sum_into(ctx.stream, loss_sum, row_loss_.data(), args.rows);
}

void RowLoss::forward_backward(Context& ctx, const Tensor& pred, const Tensor& target,
                               float grad_scale, double* loss_sum) {
  RowLossArgs args = inputs(ctx, pred, target);
  grad_.resize(pred.shape(), ctx.target);
  args.grad = grad_.data();
  args.grad_scale = grad_scale;
  run(ctx, args, loss_sum);
}

void RowLoss::forward(Context& ctx, const Tensor& pred, const Tensor& target, double* loss_sum) {
  run(ctx, inputs(ctx, pred, target), loss_sum);
}

double* RowLoss::zeroed_host_sum(const Context& ctx) {
  if (host_sum_.defined() && host_sum_.target() == ctx.target) {
    host_sum_.zero();
  } else {
    host_sum_ = Tensor({1}, ctx.target, DType::F64);
  }
  return host_sum_.as<double>();
}

double RowLoss::forward_backward(Context& ctx, const Tensor& pred, const Tensor& target,
                                 float grad_scale) {
  forward_backward(ctx, pred, target, grad_scale, zeroed_host_sum(ctx));
  return host_sum_.to_host<double>()[0];
}

double RowLoss::forward(Context& ctx, const Tensor& pred, const Tensor& target) {
  forward(ctx, pred, target, zeroed_host_sum(ctx));
  return host_sum_.to_host<double>()[0];
}

}  // namespace noeira
