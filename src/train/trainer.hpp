#pragma once
// The training loop, a template over the model type (one instantiation per preset). Read it top
// to bottom: load -> forward -> loss -> vjp -> reduce -> clip -> schedule -> optimizer step ->
// log, then an evaluation of the test split after every epoch.
//
// Every run is a distributed run: the sharding policy (distributed/policy.hpp) owns the
// parameters, and one rank (a simulated world of one) is the special case, not another code
// path. Each rank reads its rows of the global batch; the policy reduces gradients, computes the
// global clip norm and updates what this rank owns. Only rank 0 prints and writes metrics.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "core/module.hpp"
#include "distributed/host_collectives.hpp"
#include "distributed/policy.hpp"
#include "distributed/units.hpp"
#include "loss/accuracy.hpp"
#include "loss/cross_entropy.hpp"
#include "optim/clip.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "train/batch.hpp"
#include "train/checkpointing.hpp"
#include "train/config.hpp"
#include "train/dataset.hpp"
#include "train/metrics.hpp"
#include "train/order.hpp"
#include "train/progress.hpp"
#include "train/stop_signal.hpp"

namespace noeira {

struct EvalResult {
  double loss = 0.0;      // mean cross-entropy
  double accuracy = 0.0;  // top-1, in [0, 1]
  std::int64_t samples = 0;
};

// Evaluates the model on a whole split in file order (Mode::Eval: dropout off).
template <Module M>
EvalResult evaluate(M& model, Context& ctx, const ResidentData& data, std::int64_t eval_batch,
                    Batch& batch, CrossEntropyLoss& loss) {
  const Mode saved = ctx.mode;
  ctx.mode = Mode::Eval;
  double loss_sum = 0.0;
  std::int64_t correct = 0;
  for (std::int64_t s = 0; s < steps_per_epoch(eval_batch, data.count); ++s) {
    gather_batch(batch, data, Tensor(), global_batch(s, eval_batch, data.count), ctx.stream);
    const Tensor& logits = model.forward(ctx, batch.x);
    loss_sum += loss.forward(ctx, logits, batch.labels);
    correct += count_correct(ctx, logits, batch.labels);
  }
  ctx.mode = saved;
  const double n = static_cast<double>(data.count);
  return EvalResult{loss_sum / n, static_cast<double>(correct) / n, data.count};
}

// Evaluates the model on a whole split, each rank its rows of every evaluation batch; the sums
// are allreduced, so every rank returns the same result. Collective: under ZeRO-3 each forward
// gathers the units' parameters, so every rank runs the same number of forwards.
template <Module M>
EvalResult evaluate(M& model, Context& ctx, const ResidentData& data, std::int64_t eval_batch,
                    Batch& batch, CrossEntropyLoss& loss, dist::ShardingPolicy& policy) {
  dist::ProcessGroup& group = policy.group();
  const Mode saved = ctx.mode;
  ctx.mode = Mode::Eval;
  double sums[2] = {0.0, 0.0};  // loss, correct
  for (std::int64_t s = 0; s < steps_per_epoch(eval_batch, data.count); ++s) {
    const RowRange global = global_batch(s, eval_batch, data.count);
    RowRange mine = local_rows(global, group.rank(), group.size());
    // A short last batch may leave a rank without rows; it still runs a (one-row) forward to
    // take part in ZeRO-3's gathers, and counts nothing.
    const bool idle = mine.size() == 0;
    if (idle) mine = RowRange{global.begin, global.begin + 1};
    gather_batch(batch, data, Tensor(), mine, ctx.stream);
    const Tensor& logits = dist::forward_units(model, ctx, batch.x, policy);
    if (idle) continue;
    sums[0] += loss.forward(ctx, logits, batch.labels);
    sums[1] += static_cast<double>(count_correct(ctx, logits, batch.labels));
  }
  ctx.mode = saved;
  dist::allreduce_host(group, sums);
  const double n = static_cast<double>(data.count);
  return EvalResult{sums[0] / n, sums[1] / n, data.count};
}

// Prints every rank's memory_report(), one line per rank in rank order (a barrier between
// ranks keeps simulated ranks' lines apart). Collective.
inline void report_memory(dist::ShardingPolicy& policy, LogFormat format) {
  dist::ProcessGroup& group = policy.group();
  for (int r = 0; r < group.size(); ++r) {
    if (group.rank() == r) {
      const std::string line =
          "[rank " + std::to_string(r) + "] memory: " + policy.memory_report().to_string() + "\n";
      std::FILE* out = format == LogFormat::Json ? stderr : stdout;
      std::fputs(line.c_str(), out);
      std::fflush(out);
    }
    group.barrier().wait();
  }
}

struct TrainSummary {
  EpochRecord last;              // the final epoch's record
  double mean_epoch_time_s = 0;  // training time per epoch, evaluation excluded
  std::int64_t steps = 0;        // optimizer steps completed (counting a resumed run's past)
  std::filesystem::path checkpoint;  // the last checkpoint written, if any
  int stop_signal = 0;           // non-zero: stopped early by this signal, after a checkpoint
};

// Trains the model whose parameters `policy` owns (built over the model's walk, with the initial
// parameters already broadcast). Every rank of the policy's group calls it with the same
// configuration and data; progress and metrics are used by rank 0 only (metrics may be null).
// `resume`: a checkpoint to continue from (any world size or policy), empty for a fresh run.
// With cfg.checkpoint_dir set, checkpoints are written every cfg.checkpoint_every steps, at the
// end, and when a stop signal (train/stop_signal.hpp) arrives, which ends the run early.
template <Module M>
TrainSummary train(M& model, Context& ctx, const TrainConfig& cfg, const ResidentData& train_set,
                   const ResidentData& test_set, Progress& progress, MetricsFile* metrics,
                   dist::ShardingPolicy& policy, const std::filesystem::path& resume = {}) {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };

  dist::ProcessGroup& group = policy.group();
  const bool reporter = group.rank() == 0;
  const std::int64_t n = train_set.count;
  const std::int64_t steps = steps_per_epoch(cfg.batch, n);
  Optimizer optimizer(optimizer_config(cfg));
  const LrSchedule schedule = lr_schedule(cfg, steps * cfg.epochs);
  CrossEntropyLoss loss;
  Batch batch(ctx.target);       // this rank's rows of the current global batch
  Batch eval_batch(ctx.target);  // this rank's rows of the current evaluation batch

  TrainSummary summary;
  // Names and shapes for checkpoints (the params' storage is the policy's by now).
  const dist::WalkUnits walk = dist::walk_units(model);
  TrainCursor start;
  if (!resume.empty()) {
    start = load_checkpoint(resume, policy, walk, optimizer, cfg, n);
    if (reporter) {
      progress.note(detail::concat("resumed from ", resume.string(), " at step ", start.step,
                                   " (", start.samples_seen, " samples seen)"));
    }
  }
  // The cursor is in global samples; the epoch order is a function of (seed, epoch), so the
  // next batch is found by arithmetic (the batch size is checked by load_checkpoint).
  const std::int64_t first_epoch = start.samples_seen / n;
  const std::int64_t first_step = (start.samples_seen % n) / cfg.batch;
  std::int64_t step = start.step;  // optimizer steps completed in the run
  std::int64_t samples_seen = start.samples_seen;
  // A resumed run saves at its end even with no step left: its checkpoint then shows what was
  // loaded, in this run's layout.
  std::int64_t saved_step = -1;
  const bool checkpoints = !cfg.checkpoint_dir.empty();
  // The running loss sums (this rank's rows), kept across a resume: see TrainCursor.
  double epoch_loss_sum = start.epoch_loss_sum;    // Σ per-sample loss over the epoch so far
  double window_loss_sum = start.window_loss_sum;  // the same since the last step record
  std::int64_t window_samples = start.window_samples;  // global samples since the last record
  auto checkpoint = [&] {
    TrainCursor cursor{step, samples_seen};
    cursor.epoch_loss_sum = epoch_loss_sum;
    cursor.window_loss_sum = window_loss_sum;
    cursor.window_samples = window_samples;
    summary.checkpoint = save_checkpoint(policy, walk, optimizer, schedule, cfg, n, cursor);
    saved_step = step;
    if (reporter) progress.note(detail::concat("checkpoint ", summary.checkpoint.string()));
  };
  auto stopped = [&] {
    summary.stop_signal = stop_signal() != 0 ? stop_signal() : SIGTERM;
    summary.steps = step;
    return summary;
  };
  const Clock::time_point run_start = Clock::now();
  double train_time = 0.0;
  std::int64_t epochs_run = 0;

  for (std::int64_t epoch = first_epoch; epoch < cfg.epochs; ++epoch) {
    ++epochs_run;
    // The epoch's sample order: a function of (seed, epoch) only, the same for any world size.
    // Uploaded once per epoch: every batch is then a gather on the target.
    const Tensor order = resident_order(epoch_order(cfg.seed, epoch, n), ctx.target);
    const Clock::time_point epoch_start = Clock::now();
    bool checkpoint_after_epoch = false;
    bool stop_after_epoch = false;
    if (epoch != first_epoch || first_step == 0) {  // not a resume in the middle of this epoch
      epoch_loss_sum = 0.0;
      window_loss_sum = 0.0;
      window_samples = 0;
    }
    std::int64_t window_rows = 0;  // this rank's rows since the last record (for the progress bar)
    Clock::time_point window_start = epoch_start;
    ctx.mode = Mode::Train;

    for (std::int64_t s = epoch == first_epoch ? first_step : 0; s < steps; ++s) {
      // 1. load this rank's rows of the global batch
      const RowRange global = global_batch(s, cfg.batch, n);
      const RowRange mine = local_rows(global, group.rank(), group.size());
      gather_batch(batch, train_set, order, mine, ctx.stream);
      ctx.step = static_cast<std::uint64_t>(step);
      ctx.row_offset = mine.begin - global.begin;  // dropout masks follow the global row

      // 2. forward; ZeRO-3 gathers each unit's parameters just before it runs
      const Tensor& logits = dist::forward_units(model, ctx, batch.x, policy);

      // 3. loss; the gradient is the mean over the GLOBAL batch, whatever this rank's share, so
      //    the sum over ranks that the policy computes is the global mean
      const double loss_sum = loss.forward_backward(ctx, logits, batch.labels,
                                                    1.0f / static_cast<float>(global.size()));

      // 4. backward; each unit's gradient reduction starts as soon as its vjp is done
      dist::vjp_units(model, ctx, loss.grad(), InputGrad::Skip, policy);

      // 5. wait for every gradient reduction: this rank's owned gradients are now global sums
      policy.reduce_gradients();

      // 6. clip by the global norm (per-shard sums of squares, one scalar allreduce); the norm
      //    is also computed, for the log, on logged steps (collective: every rank logs alike)
      const bool log_step = cfg.log_every > 0 && (step + 1) % cfg.log_every == 0;
      double grad_norm = std::numeric_limits<double>::quiet_NaN();
      if (cfg.grad_clip > 0.0) {
        grad_norm = policy.clip_grad_norm(cfg.grad_clip);
      } else if (log_step) {
        grad_norm = std::sqrt(policy.grad_sum_squares());
      }

      // 7. schedule and optimizer step over what this rank owns (ZeRO-1/2 then all-gather)
      const float lr = schedule.lr_at(step);
      policy.step(optimizer, lr);
      ++step;
      samples_seen += global.size();
      // After the first step the optimizer state exists: the report shows the steady state.
      if (step == 1 && cfg.report_memory) report_memory(policy, cfg.log_format);

      // 8. log; the loss is allreduced only where it is logged
      epoch_loss_sum += loss_sum;
      window_loss_sum += loss_sum;
      window_samples += global.size();
      window_rows += mine.size();
      if (reporter) {
        const std::int64_t epoch_samples = s == steps - 1 ? n : (s + 1) * cfg.batch;
        // The bar shows rank 0's running loss: a glance, not a record.
        progress.tick(epoch + 1, cfg.epochs, s + 1, steps,
                      window_loss_sum / static_cast<double>(window_rows > 0 ? window_rows : 1),
                      static_cast<double>(epoch_samples) / seconds_since(epoch_start));
      }
      if (log_step) {
        const double window_loss = dist::sum_over_ranks(group, window_loss_sum);
        if (reporter) {
          StepRecord r;
          r.epoch = epoch + 1;
          r.step = step;
          r.epoch_step = s + 1;
          r.steps_per_epoch = steps;
          r.loss = window_loss / static_cast<double>(window_samples);
          r.lr = lr;
          r.grad_norm = grad_norm;
          r.samples_per_s = static_cast<double>(window_samples) / seconds_since(window_start);
          r.elapsed_s = seconds_since(run_start);
          if (metrics != nullptr) metrics->write(to_json(r));
          progress.step(r);
        }
        window_loss_sum = 0.0;
        window_samples = 0;
        window_rows = 0;
        window_start = Clock::now();
      }

      // 9. checkpoint when due, or when any rank was asked to stop (ranks may receive a signal
      //    at different steps: one scalar allreduce makes them agree on this one)
      if (checkpoints) {
        const bool stop =
            dist::sum_over_ranks<std::int64_t>(group, stop_signal() != 0 ? 1 : 0) > 0;
        const bool due = cfg.checkpoint_every > 0 && step % cfg.checkpoint_every == 0;
        if (s == steps - 1) {
          // At an epoch's last step the checkpoint waits for the epoch's evaluation and record,
          // so that a run resumed from it starts cleanly with the next epoch.
          checkpoint_after_epoch = due || stop;
          stop_after_epoch = stop;
        } else {
          if (due || stop) checkpoint();
          if (stop) return stopped();
        }
      }
    }
    const double epoch_time = seconds_since(epoch_start);
    train_time += epoch_time;
    epoch_loss_sum = dist::sum_over_ranks(group, epoch_loss_sum);

    // Evaluation on the test split, outside the training time; every rank takes part.
    const Clock::time_point eval_start = Clock::now();
    const EvalResult test =
        evaluate(model, ctx, test_set, cfg.eval_batch, eval_batch, loss, policy);

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
    if (reporter) {
      if (metrics != nullptr) metrics->write(to_json(r));
      progress.epoch(r);
    }
    summary.last = r;
    if (checkpoint_after_epoch) {
      epoch_loss_sum = 0.0;  // recorded: nothing of this epoch is carried into the next
      window_loss_sum = 0.0;
      window_samples = 0;
      checkpoint();
    }
    if (stop_after_epoch) return stopped();
  }
  if (checkpoints && saved_step != step) checkpoint();
  summary.steps = step;
  summary.mean_epoch_time_s = epochs_run > 0 ? train_time / static_cast<double>(epochs_run) : 0.0;
  return summary;
}

}  // namespace noeira
