#pragma once
// What the trainer trains on: a task supplies the data and the loss, and says how its model is
// evaluated. The trainer (train/trainer.hpp) and the step (train/step.hpp) are generic over it;
// classification of images is train/supervised.hpp, next-token prediction of text comes with
// the transformer presets.
//
// A run is `periods()` periods of `steps_per_period()` optimizer steps (classification: epochs
// over the training split); each period ends with an evaluation and a period record. A task:
//
//   std::int64_t periods() const;  std::int64_t steps_per_period() const;
//   std::int64_t period_targets() const;   // loss terms per period (the period loss's divisor)
//   std::int64_t targets_per_sample() const;  // loss terms per sample (a window's tokens)
//   RecordLabels labels() const;           // how its records name periods, split, throughput
//   std::int64_t train_samples() const;    // the size a checkpoint checks a resume against
//   void begin_period(std::int64_t period, Target target);
//   // This rank's share of micro-batch `micro` of global step s of the current period
//   // (MicroBatch, train/order.hpp; the whole batch by default), gathered on ctx.target;
//   // returns the global batch and this rank's rows of it. Rows that a short last batch leaves
//   // empty gather a stand-in row instead (rows_to_compute), which the step does not count.
//   StepRows load(std::int64_t s, int rank, int world, Stream stream, MicroBatch micro = {});
//   const Tensor& input() const;           // what load gathered: the model's input
//   // Adds Σ of the loss over this rank's targets into *loss_sum (one double in ctx.target
//   // memory: no host synchronization) and writes loss_grad() scaled by grad_scale.
//   void loss(Context& ctx, const Tensor& output, float grad_scale, double* loss_sum);
//   const Tensor& loss_grad() const;
//   // Evaluates on the held-out split; every rank of the policy's group calls it (collective);
//   // a null policy evaluates a plain model on one rank.
//   template <Module M> EvalResult evaluate(M& model, Context& ctx, dist::ShardingPolicy* policy);
#include <cmath>
#include <cstdint>
#include <limits>

#include "train/order.hpp"

namespace noeira {

// One step's batch: the global rows (positions in the period's sample order), this rank's rows
// (of the micro-batch loaded), and the number of loss terms of the whole global batch over all
// ranks (the gradient is the mean over them, however many micro-batches add it up). `mine` may
// be empty (the short last batch of a rank without rows).
struct StepRows {
  RowRange global;
  RowRange mine;
  std::int64_t global_targets = 0;
};

// What an evaluation reports: the mean loss, and what the task defines besides (top-1 accuracy
// for classification, the coefficient of determination for regression; NaN where the task has
// none).
struct EvalResult {
  double loss = 0.0;
  double accuracy = std::numeric_limits<double>::quiet_NaN();
  double r2 = std::numeric_limits<double>::quiet_NaN();
  // A regression's root mean squared error of the prediction (the first outputs of a row).
  double rmse = std::numeric_limits<double>::quiet_NaN();
  bool regression = false;  // r2 is NaN where the targets do not vary: this says what was run
  std::int64_t samples = 0;
};

}  // namespace noeira
