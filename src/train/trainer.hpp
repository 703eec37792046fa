#pragma once
// The training loop, a template over the model type (one instantiation per preset). Read it top
// to bottom: load -> forward -> loss -> vjp -> clip -> schedule -> optimizer step -> log, then an
// evaluation of the test split after every epoch.
//
// Distributed training (issue 4) slots in at the marked points: this rank's rows come from
// local_rows(), gradients are reduced by the sharding policy after the vjp, the clip norm is
// global, and the logged losses are allreduced. With one rank (today) those points are no-ops.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/module.hpp"
#include "loss/accuracy.hpp"
#include "loss/cross_entropy.hpp"
#include "optim/clip.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "train/batch.hpp"
#include "train/config.hpp"
#include "train/dataset.hpp"
#include "train/metrics.hpp"
#include "train/order.hpp"
#include "train/progress.hpp"

namespace noeira {

// This process's place among the ranks of a run; the process group will provide it.
struct Ranks {
  int rank = 0;
  int world = 1;
};

struct EvalResult {
  double loss = 0.0;      // mean cross-entropy
  double accuracy = 0.0;  // top-1, in [0, 1]
  std::int64_t samples = 0;
};

// Evaluates the model on a whole split in file order (Mode::Eval: dropout off).
template <Module M>
EvalResult evaluate(M& model, Context& ctx, const Dataset& data, std::int64_t eval_batch,
                    Batch& batch, CrossEntropyLoss& loss) {
  const Mode saved = ctx.mode;
  ctx.mode = Mode::Eval;
  double loss_sum = 0.0;
  std::int64_t correct = 0;
  for (std::int64_t s = 0; s < steps_per_epoch(eval_batch, data.count); ++s) {
    gather_batch(batch, data, {}, global_batch(s, eval_batch, data.count));
    const Tensor& logits = model.forward(ctx, batch.x);
    loss_sum += loss.forward(ctx, logits, batch.labels);
    correct += count_correct(ctx, logits, batch.labels);
  }
  ctx.mode = saved;
  const double n = static_cast<double>(data.count);
  return EvalResult{loss_sum / n, static_cast<double>(correct) / n, data.count};
}

struct TrainSummary {
  EpochRecord last;              // the final epoch's record
  double mean_epoch_time_s = 0;  // training time per epoch, evaluation excluded
};

template <Module M>
TrainSummary train(M& model, Context& ctx, const TrainConfig& cfg, const Dataset& train_set,
                   const Dataset& test_set, Progress& progress, MetricsFile* metrics,
                   Ranks ranks = {}) {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };

  const std::int64_t n = train_set.count;
  const std::int64_t steps = steps_per_epoch(cfg.batch, n);
  Optimizer optimizer(optimizer_config(cfg));
  const LrSchedule schedule = lr_schedule(cfg, steps * cfg.epochs);
  CrossEntropyLoss loss;
  Batch batch(ctx.target);       // this rank's rows of the current global batch
  Batch eval_batch(ctx.target);  // test rows, eval_batch at a time

  TrainSummary summary;
  std::int64_t step = 0;  // optimizer steps completed in the run
  const Clock::time_point run_start = Clock::now();
  double train_time = 0.0;

  for (std::int64_t epoch = 0; epoch < cfg.epochs; ++epoch) {
    // The epoch's sample order: a function of (seed, epoch) only, the same for any world size.
    const std::vector<std::int32_t> order = epoch_order(cfg.seed, epoch, n);
    const Clock::time_point epoch_start = Clock::now();
    double epoch_loss_sum = 0.0;     // Σ per-sample loss over the epoch
    double window_loss_sum = 0.0;    // the same since the last step record
    std::int64_t window_samples = 0;
    Clock::time_point window_start = epoch_start;
    ctx.mode = Mode::Train;

    for (std::int64_t s = 0; s < steps; ++s) {
      // 1. load this rank's rows of the global batch
      const RowRange global = global_batch(s, cfg.batch, n);
      const RowRange mine = local_rows(global, ranks.rank, ranks.world);
      gather_batch(batch, train_set, order, mine);
      ctx.step = static_cast<std::uint64_t>(step);
      ctx.row_offset = mine.begin - global.begin;

      // 2. forward
      const Tensor& logits = model.forward(ctx, batch.x);

      // 3. loss; the gradient is the mean over the GLOBAL batch, whatever this rank's share
      const double loss_sum = loss.forward_backward(ctx, logits, batch.labels,
                                                    1.0f / static_cast<float>(global.size()));
      // (distributed: allreduce loss_sum for logging)

      // 4. backward; nobody reads the gradient of the data
      model.vjp(ctx, loss.grad(), InputGrad::Skip);
      // (distributed: the sharding policy reduces the gradients here)

      // 5. clip by the global norm (the norm is also computed, for the log, on logged steps)
      const bool log_step = cfg.log_every > 0 && (step + 1) % cfg.log_every == 0;
      double grad_norm = std::numeric_limits<double>::quiet_NaN();
      if (cfg.grad_clip > 0.0) {
        grad_norm = clip_grad_norm(model, ctx, cfg.grad_clip);
      } else if (log_step) {
        grad_norm = std::sqrt(grad_sum_squares(model, ctx));
      }

      // 6. schedule and optimizer step
      const float lr = schedule.lr_at(step);
      optimizer.step(ctx, model, lr);
      ++step;

      // 7. log
      epoch_loss_sum += loss_sum;
      window_loss_sum += loss_sum;
      window_samples += global.size();
      const std::int64_t epoch_samples = s == steps - 1 ? n : (s + 1) * cfg.batch;
      progress.tick(epoch + 1, cfg.epochs, s + 1, steps,
                    window_loss_sum / static_cast<double>(window_samples),
                    static_cast<double>(epoch_samples) / seconds_since(epoch_start));
      if (log_step) {
        StepRecord r;
        r.epoch = epoch + 1;
        r.step = step;
        r.epoch_step = s + 1;
        r.steps_per_epoch = steps;
        r.loss = window_loss_sum / static_cast<double>(window_samples);
        r.lr = lr;
        r.grad_norm = grad_norm;
        r.samples_per_s = static_cast<double>(window_samples) / seconds_since(window_start);
        r.elapsed_s = seconds_since(run_start);
        if (metrics != nullptr) metrics->write(to_json(r));
        progress.step(r);
        window_loss_sum = 0.0;
        window_samples = 0;
        window_start = Clock::now();
      }
    }
    const double epoch_time = seconds_since(epoch_start);
    train_time += epoch_time;

    // Evaluation on the test split, outside the training time.
    const Clock::time_point eval_start = Clock::now();
    const EvalResult test = evaluate(model, ctx, test_set, cfg.eval_batch, eval_batch, loss);

    EpochRecord r;
    r.epoch = epoch + 1;
    r.epochs = cfg.epochs;
    r.step = step;
    r.train_loss = epoch_loss_sum / static_cast<double>(n);
    r.test_loss = test.loss;
    r.test_accuracy = test.accuracy;
    r.test_samples = test.samples;
    r.samples_per_s = static_cast<double>(n) / epoch_time;
    r.epoch_time_s = epoch_time;
    r.eval_time_s = seconds_since(eval_start);
    r.elapsed_s = seconds_since(run_start);
    if (metrics != nullptr) metrics->write(to_json(r));
    progress.epoch(r);
    summary.last = r;
  }
  summary.mean_epoch_time_s = train_time / static_cast<double>(cfg.epochs);
  return summary;
}

}  // namespace noeira
