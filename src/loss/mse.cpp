#include "loss/mse.hpp"

#include "loss/checks.hpp"

namespace noeira {

namespace {
constexpr const char* kName = "MSELoss";
}  // namespace

double MSELoss::forward_backward(Context& ctx, const Tensor& pred, const Tensor& target,
                                 float grad_scale) {
  loss_checks::matrix(ctx, pred, kName, "pred");
  grad_.resize(pred.shape(), ctx.target);
  return run(ctx, pred, target, grad_.data(), grad_scale);
}

double MSELoss::forward(Context& ctx, const Tensor& pred, const Tensor& target) {
  return run(ctx, pred, target, nullptr, 0.0f);
}

double MSELoss::run(Context& ctx, const Tensor& pred, const Tensor& target, float* grad,
                    float grad_scale) {
  loss_checks::same_shape(ctx, pred, target, kName, "pred", "target");
  const std::int64_t rows = pred.dim(0);
  const std::int64_t cols = pred.dim(1);
  row_loss_.resize({rows}, ctx.target);
  RowLossArgs args;
  args.row_loss = row_loss_.data();
  args.grad = grad;
  args.pred = pred.data();
  args.target = target.data();
  args.rows = rows;
  args.cols = cols;
  args.grad_scale = grad_scale;
  ctx.k->row_loss(ctx.stream, LossKind::Mse, args);
  return ctx.k->sum(ctx.stream, row_loss_.data(), rows);
}

}  // namespace noeira
