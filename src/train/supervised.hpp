#pragma once
// The supervised task (train/task.hpp), as the data's targets say: classification (integer labels,
// softmax cross-entropy, top-1 accuracy on the test split) or regression (float targets, a
// TargetLoss: the mean squared error as torch.nn.MSELoss computes it unless told otherwise; RMSE
// and R² of the prediction on the test split). A period is an epoch: a
// pass over the training split in an order that is a function of (seed, epoch) only, so the
// global batch is the same for any number of ranks; rank r takes rows [r·B/N, (r+1)·B/N) of each
// global batch. Training batches may be augmented (train/augment.hpp), drawn per (seed, epoch,
// sample); the test split never is.
#include <cmath>
#include <cstdint>
#include <memory>

#include "core/module.hpp"
#include "distributed/host_collectives.hpp"
#include "distributed/policy.hpp"
#include "distributed/units.hpp"
#include "loss/accuracy.hpp"
#include "loss/cross_entropy.hpp"
#include "loss/target_loss.hpp"
#include "train/augment.hpp"
#include "train/batch.hpp"
#include "train/metrics.hpp"
#include "train/task.hpp"

namespace noeira {

class SupervisedTask {
 public:
  // The splits stay the caller's and must outlive the task. An augmentation the training split
  // cannot take (no image shape) is an InputError here, before any step.
  // A regression's loss comes from `losses` (one for training, one per evaluation).
  SupervisedTask(const ResidentData& train, const ResidentData& test, std::int64_t epochs,
                 std::int64_t batch, std::int64_t eval_batch, std::uint64_t seed,
                 Augmentation augment = {},
                 TargetLossFactory losses = target_loss_factory(LossChoice::Mse));

  std::int64_t periods() const { return epochs_; }
  std::int64_t steps_per_period() const { return steps_per_epoch(batch_size_, train_.count); }
  std::int64_t period_targets() const { return train_.count; }
  std::int64_t targets_per_sample() const { return 1; }
  RecordLabels labels() const { return {}; }
  std::int64_t train_samples() const { return train_.count; }

  // Uploads the epoch's sample order (every batch of the epoch is then a gather on the target)
  // and keys the epoch's augmentation.
  void begin_period(std::int64_t epoch, Target target);
  StepRows load(std::int64_t s, int rank, int world, Stream stream, MicroBatch micro = {});
  const Tensor& input() const { return batch_.x; }

  void loss(Context& ctx, const Tensor& logits, float grad_scale, double* loss_sum) {
    if (train_.regression()) {
      target_loss_->forward_backward(ctx, logits, batch_.targets, grad_scale, loss_sum);
    } else {
      cross_entropy_.forward_backward(ctx, logits, batch_.labels, grad_scale, loss_sum);
    }
  }
  const Tensor& loss_grad() const {
    return train_.regression() ? target_loss_->grad() : cross_entropy_.grad();
  }

  // evaluate_supervised over the test split.
  template <Module M>
  EvalResult evaluate(M& model, Context& ctx, dist::ShardingPolicy* policy);

 private:
  const ResidentData& train_;
  const ResidentData& test_;
  std::int64_t epochs_;
  std::int64_t batch_size_;
  std::int64_t eval_batch_;
  std::uint64_t seed_;
  Augmentation augment_;
  CropFlip crop_flip_;  // what keys the current epoch's draws, when augment_ is crop-flip
  Tensor order_;        // [train count] I32: the current epoch's sample order, on the target
  Batch batch_;         // this rank's rows of the current global batch
  CrossEntropyLoss cross_entropy_;  // classification
  TargetLossFactory losses_;        // regression
  std::unique_ptr<TargetLoss> target_loss_;
};

namespace detail {
// Σ over rows and the first targets.dim(1) columns of (pred - target)², read back to the host:
// the RMSE and R² of a loss that is not the squared error itself (evaluation only).
double prediction_squared_errors(const Tensor& pred, const Tensor& targets);
}  // namespace detail

// Mean cross-entropy and top-1 accuracy of `model` over `data` in file order, or for regression
// targets the mean of `loss` (null: the mean squared error), the RMSE of the prediction and
// R² = 1 - Σ (y - ŷ)² / Σ (y - column mean)² (every output pooled, as scikit-learn's
// variance-weighted r2_score; NaN where the targets do not vary), in
// Mode::Eval (dropout off), each rank of the policy's group its rows of every evaluation batch; a
// null policy evaluates a plain model on one rank. Collective with a policy: under ZeRO-3 each
// forward gathers the units' parameters, so every rank runs the same number of forwards.
template <Module M>
EvalResult evaluate_supervised(M& model, Context& ctx, const ResidentData& data,
                               std::int64_t eval_batch, dist::ShardingPolicy* policy,
                               TargetLoss* loss = nullptr) {
  const int rank = policy != nullptr ? policy->group().rank() : 0;
  const int world = policy != nullptr ? policy->group().size() : 1;
  const Mode saved = ctx.mode;
  ctx.mode = Mode::Eval;
  Batch rows(ctx.target);
  CrossEntropyLoss cross_entropy;
  std::unique_ptr<TargetLoss> squared_error;
  if (loss == nullptr && data.regression()) {
    squared_error = target_loss_factory(LossChoice::Mse)();
    loss = squared_error.get();
  }
  Tensor loss_sum({1}, ctx.target, DType::F64);
  double correct = 0.0;  // classification: rows right; regression: the prediction's squared errors
  for (std::int64_t s = 0; s < steps_per_epoch(eval_batch, data.count); ++s) {
    const RowRange global = global_batch(s, eval_batch, data.count);
    const RowRange own = local_rows(global, rank, world);
    // A rank without rows still runs the forward (ZeRO-3 gathers) and counts nothing.
    const bool idle = own.size() == 0;
    const RowRange mine = rows_to_compute(own, global);
    gather_batch(rows, data, Tensor(), mine, ctx.stream);
    const Tensor& logits = policy != nullptr ? dist::forward_units(model, ctx, rows.x, *policy)
                                             : model.forward(ctx, rows.x);
    if (idle) continue;
    if (data.regression()) {
      loss->forward(ctx, logits, rows.targets, loss_sum.as<double>());
      // Read back per batch, as the accuracy is: evaluation only.
      if (!loss->is_squared_error()) {
        correct += detail::prediction_squared_errors(logits, rows.targets);
      }
      continue;
    }
    cross_entropy.forward(ctx, logits, rows.labels, loss_sum.as<double>());
    // The count comes back to the host per batch: a synchronization, in evaluation only.
    correct += static_cast<double>(count_correct(ctx, logits, rows.labels));
  }
  ctx.mode = saved;
  double sums[2] = {loss_sum.to_host<double>()[0], correct};  // both exact in double
  if (policy != nullptr) dist::allreduce_host(policy->group(), sums);
  const double n = static_cast<double>(data.count);
  EvalResult result;
  result.loss = sums[0] / n;
  result.samples = data.count;
  if (!data.regression()) {
    result.accuracy = sums[1] / n;
    return result;
  }
  // The squared error's loss of a row is its mean over the targets: the squared errors sum to
  // loss · targets.
  result.regression = true;
  const auto targets = static_cast<double>(data.targets.dim(1));
  const double squared_errors = loss->is_squared_error() ? sums[0] * targets : sums[1];
  result.rmse = loss->is_squared_error() ? std::sqrt(result.loss)
                                         : std::sqrt(squared_errors / (n * targets));
  if (data.target_spread > 0.0) result.r2 = 1.0 - squared_errors / data.target_spread;
  return result;
}

template <Module M>
EvalResult SupervisedTask::evaluate(M& model, Context& ctx, dist::ShardingPolicy* policy) {
  std::unique_ptr<TargetLoss> loss = train_.regression() ? losses_() : nullptr;
  return evaluate_supervised(model, ctx, test_, eval_batch_, policy, loss.get());
}

}  // namespace noeira
