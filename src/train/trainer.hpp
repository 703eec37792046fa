#pragma once
// The training loop, a template over the model type (one instantiation per preset) and the task
// (train/task.hpp: the data, the loss, the evaluation). The step itself is train/step.hpp; this
// file is what surrounds it: the periods (epochs) and their evaluation, the records, the
// checkpoints and the stop signals.
//
// Every run is a distributed run: the sharding policy (distributed/policy.hpp) owns the
// parameters, and one rank (a simulated world of one) is the special case, not another code
// path. Only rank 0 prints and writes metrics.
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/module.hpp"
#include "distributed/buffer_sync.hpp"
#include "distributed/host_collectives.hpp"
#include "distributed/policy.hpp"
#include "distributed/units.hpp"
#include "kernels/size_math.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "train/checkpointing.hpp"
#include "train/config.hpp"
#include "train/divergence.hpp"
#include "train/metrics.hpp"
#include "train/progress.hpp"
#include "train/step.hpp"
#include "train/stop_signal.hpp"
#include "train/task.hpp"

namespace noeira {

// Prints every rank's memory_report(), one line per rank in rank order (a barrier between
// ranks keeps simulated ranks' lines apart). Collective.
// What a step's tensors hold beyond the store (dist::MemoryReport::activation_bytes): made just
// before the step, read just after it, on the rank's own thread.
class StepMemoryProbe {
 public:
  StepMemoryProbe(const dist::ShardingPolicy& policy, Target target);
  std::int64_t activation_bytes(const dist::ShardingPolicy& policy) const;

 private:
  static std::int64_t store_bytes(const dist::ShardingPolicy& policy);
  Target target_;
  std::int64_t live_at_start_;
  std::int64_t store_at_start_;
};

// Prints each rank's memory report, in rank order, with the step's activation bytes.
void report_memory(dist::ShardingPolicy& policy, LogFormat format, std::int64_t activation_bytes);

struct TrainSummary {
  EpochRecord last;              // the final epoch's record
  double mean_epoch_time_s = 0;  // training time per epoch, evaluation excluded
  std::int64_t steps = 0;        // optimizer steps completed (counting a resumed run's past)
  std::filesystem::path checkpoint;  // the last checkpoint written, if any
  int stop_signal = 0;           // non-zero: stopped early by this signal, after a checkpoint
  // Ended where a callback's should_stop asked (train/progress.hpp), as at its last step.
  bool stopped_early = false;
  std::int64_t periods = 0;           // the periods the schedule spans (cfg.periods_this_run)
  // Non-empty: a checkpoint could not be saved (why, and what was cleaned up); the run stopped
  // there, on every rank alike, so that the caller can still save the parameters elsewhere.
  std::string save_failure;
};

// Trains the model whose parameters `policy` owns (built over the model's walk, with the initial
// parameters already broadcast) on `task`. Every rank of the policy's group calls it with the
// same configuration and data; progress and metrics are used by rank 0 only (metrics may be
// null). `resume`: a checkpoint to continue from (any world size or policy), empty for a fresh
// run. With cfg.checkpoint_dir set, checkpoints are written every cfg.checkpoint_every steps, at
// the end, and when a stop signal (train/stop_signal.hpp) arrives, which ends the run early; a
// save that fails ends it early too (summary.save_failure). A non-finite loss or gradient norm
// is a DivergedError (train/divergence.hpp).
template <Module M, class Task>
TrainSummary train(M& model, Context& ctx, const TrainConfig& cfg, Task& task, Progress& progress,
                   MetricsFile* metrics, dist::ShardingPolicy& policy,
                   const std::filesystem::path& resume = {}) {
  using Clock = std::chrono::steady_clock;
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };

  dist::ProcessGroup& group = policy.group();
  const bool reporter = group.rank() == 0;
  const std::int64_t steps = task.steps_per_period();
  Optimizer optimizer(optimizer_config(cfg));

  TrainSummary summary;
  // Names and shapes for checkpoints.
  const dist::WalkUnits walk = dist::walk_units(model);
  // Batch statistics of the global batch (--batchnorm sync) through the policy's group; with
  // per-rank statistics, rank 0's running estimates are the model's, and every rank takes them
  // before they are evaluated or saved.
  dist::SyncedBatchStats synced_stats(group);
  const bool local_buffers = cfg.batchnorm == BatchNormStats::Local && group.size() > 1;
  // For the training run; evaluation uses the running statistics.
  const ScopedSetting<CrossRankSum*> stats_scope(
      ctx.batch_stats, local_buffers || group.size() == 1 ? nullptr : &synced_stats);
  auto share_rank0_buffers = [&] {
    if (local_buffers) dist::broadcast_buffers(group, walk);
  };
  TrainCursor start;
  if (!resume.empty()) {
    start = load_checkpoint(resume, policy, walk, optimizer, cfg, task.train_samples());
    if (reporter) {
      progress.note(detail::concat("resumed from ", resume.string(), " at step ", start.step,
                                   " (", start.samples_seen, " samples seen)"));
    }
  }
  // Every period has `steps` steps (load_checkpoint checked the batch and the data), so the step
  // count says where to continue.
  const std::int64_t first_period = start.step / steps;
  const std::int64_t first_step = start.step % steps;
  // The periods this run trains, and those the schedule spans: a run of periods_this_run may go
  // past the task's, and then the schedule spans the run's end.
  const std::int64_t end_period =
      cfg.periods_this_run > 0 ? first_period + cfg.periods_this_run : task.periods();
  const std::int64_t periods = std::max(task.periods(), end_period);
  summary.periods = periods;
  const std::optional<std::int64_t> total_steps = size_product({steps, periods});
  if (!total_steps) {
    throw InputError(detail::concat("a run of ", periods, " periods of ", steps,
                                    " steps has more steps than int64 counts"));
  }
  const LrSchedule schedule = lr_schedule(cfg, *total_steps);
  // Every check that can refuse the run has passed: its records begin (nothing before, so that a
  // refused run leaves nothing behind, train/run_files.hpp).
  if (metrics != nullptr) metrics->open();
  TrainCursor at = start;  // advances with every step
  // A resumed run saves at its end even with no step left: its checkpoint then shows what was
  // loaded, in this run's layout.
  std::int64_t saved_step = -1;
  const bool checkpoints = !cfg.checkpoint_dir.empty();
  // The running loss sums of this rank's rows, kept across a resume (see TrainCursor).
  LossSums sums(ctx.target, start.epoch_loss_sum, start.window_loss_sum);
  double shown_loss = std::numeric_limits<double>::quiet_NaN();  // the last logged, for the bar
  // False when the save failed (on every rank: the save agrees): the caller returns `summary`.
  auto checkpoint = [&] {
    share_rank0_buffers();
    // The sums come back to the host: checkpoints are a synchronization point anyway.
    at.epoch_loss_sum = sums.period();
    at.window_loss_sum = sums.window();
    try {
      summary.checkpoint =
          save_checkpoint(policy, walk, optimizer, schedule, cfg, task.train_samples(), at);
    } catch (const DivergedError&) {
      throw;  // nothing worth saving elsewhere either
    } catch (const std::exception& e) {
      // Every rank has stopped writing (the save's agreement): rank 0 removes this step's
      // temporary directory, so that a full disk gets its space back.
      std::string cleaned;
      if (reporter) {
        try {
          const auto removed = io::abandon_checkpoint(cfg.checkpoint_dir, at.step);
          if (removed) cleaned = "; removed " + removed->string();
        } catch (const std::exception& again) {
          cleaned = detail::concat("; could not remove its temporary directory (", again.what(),
                                   ")");
        }
      }
      summary.save_failure =
          detail::concat("checkpoint at step ", at.step, " failed: ", e.what(), cleaned);
      summary.steps = at.step;
      return false;
    }
    saved_step = at.step;
    if (reporter) progress.note(detail::concat("checkpoint ", summary.checkpoint.string()));
    return true;
  };
  auto stopped = [&] {
    summary.stop_signal = stop_signal() != 0 ? stop_signal() : SIGTERM;
    summary.steps = at.step;
    return summary;
  };
  const Clock::time_point run_start = Clock::now();
  double train_time = 0.0;
  std::int64_t periods_run = 0;

  // Whether a callback asked to stop (rank 0's; every rank takes part in the sum).
  auto callback_stop = [&] {
    const bool asked = reporter && progress.stop_requested();
    summary.stopped_early = dist::sum_over_ranks<std::int64_t>(group, asked ? 1 : 0) > 0;
    return summary.stopped_early;
  };

  for (std::int64_t period = first_period; period < end_period; ++period) {
    ++periods_run;
    task.begin_period(period, ctx.target);
    const Clock::time_point period_start = Clock::now();
    const double gather_wait_start = policy.gather_wait_seconds();
    bool checkpoint_after_period = false;
    bool stop_after_period = false;
    if (period != first_period || first_step == 0) {  // not a resume in the middle of it
      sums.reset_period_and_window();
      at.window_samples = 0;
    }
    std::int64_t period_samples = 0;  // global samples of this period trained by this run
    Clock::time_point window_start = period_start;
    ctx.mode = Mode::Train;

    for (std::int64_t s = period == first_period ? first_step : 0; s < steps; ++s) {
      ctx.step = static_cast<std::uint64_t>(at.step);
      const bool log_step = cfg.log_every > 0 && (at.step + 1) % cfg.log_every == 0;
      const float lr = schedule.lr_at(at.step);
      std::optional<StepMemoryProbe> probe;
      if (at.step == 0 && cfg.report_memory) probe.emplace(policy, ctx.target);
      const StepResult done =
          train_step(model, ctx, task, s, policy, optimizer, sums,
                     StepSettings{lr, cfg.grad_clip, log_step, static_cast<int>(cfg.accum)});
      const double grad_norm = done.grad_norm;
      const RowRange& batch_rows = done.global;
      ++at.step;
      // The loss is read back and allreduced only where it is logged. It and the gradient norm
      // (global, and on the host whenever it was computed) are checked there, loss first: it is
      // computed first.
      const double window_loss = log_step ? dist::sum_over_ranks(group, sums.window()) : 0.0;
      if (log_step) check_finite(window_loss, at.step, "training loss", "", cfg);
      if (cfg.grad_clip > 0.0 || log_step) {
        check_finite(grad_norm, at.step, "gradient norm", "", cfg);
      }
      at.samples_seen += batch_rows.size();
      at.window_samples += batch_rows.size();
      period_samples += batch_rows.size();
      // After the first step the optimizer state exists: the report shows the steady state.
      if (probe) report_memory(policy, cfg.log_format, probe->activation_bytes(policy));

      if (reporter) {
        progress.tick(period + 1, periods, s + 1, steps, shown_loss,
                      static_cast<double>(period_samples) / seconds_since(period_start));
      }
      if (log_step) {
        if (reporter) {
          StepRecord r;
          r.labels = task.labels();
          r.epoch = period + 1;
          r.step = at.step;
          r.epoch_step = s + 1;
          r.steps_per_epoch = steps;
          r.loss = window_loss /
                   static_cast<double>(at.window_samples * task.targets_per_sample());
          r.lr = lr;
          r.grad_norm = grad_norm;
          r.samples_per_s = static_cast<double>(at.window_samples) / seconds_since(window_start);
          r.elapsed_s = seconds_since(run_start);
          if (metrics != nullptr) metrics->write(to_json(r));
          progress.step(r);
          shown_loss = r.loss;
        }
        sums.reset_window();
        at.window_samples = 0;
        window_start = Clock::now();
        // Ends the run as at its last step, below: this period is not evaluated.
        if (callback_stop()) break;
      }

      // Checkpoint when due, or when any rank was asked to stop (ranks may receive a signal at
      // different steps: one scalar allreduce makes them agree on this one).
      if (checkpoints) {
        const bool stop =
            dist::sum_over_ranks<std::int64_t>(group, stop_signal() != 0 ? 1 : 0) > 0;
        const bool due = cfg.checkpoint_every > 0 && at.step % cfg.checkpoint_every == 0;
        if (s == steps - 1) {
          // At a period's last step the checkpoint waits for its evaluation and record, so that
          // a run resumed from it starts cleanly with the next period.
          checkpoint_after_period = due || stop;
          stop_after_period = stop;
        } else {
          if ((due || stop) && !checkpoint()) return summary;
          if (stop) return stopped();
        }
      }
    }
    if (summary.stopped_early) break;
    const double period_time = seconds_since(period_start);
    train_time += period_time;
    const double period_loss = dist::sum_over_ranks(group, sums.period());
    const double gather_wait =
        policy.policy() == dist::Policy::Zero3
            ? dist::sum_over_ranks(group, policy.gather_wait_seconds() - gather_wait_start) /
                  group.size()
            : std::numeric_limits<double>::quiet_NaN();
    check_finite(period_loss, at.step, "training loss",
                 detail::concat(" in steps ", period * steps + 1, "-", at.step), cfg);

    // Evaluation, outside the training time; every rank takes part.
    const Clock::time_point eval_start = Clock::now();
    share_rank0_buffers();
    const EvalResult eval = task.evaluate(model, ctx, &policy);

    EpochRecord r;
    r.labels = task.labels();
    r.epoch = period + 1;
    r.epochs = periods;
    r.step = at.step;
    r.train_loss = period_loss / static_cast<double>(task.period_targets());
    r.test_loss = eval.loss;
    r.test_accuracy = eval.accuracy;
    r.test_r2 = eval.r2;
    r.test_rmse = eval.rmse;
    r.test_samples = eval.samples;
    r.samples_per_s = static_cast<double>(period_samples) / period_time;
    r.epoch_time_s = period_time;
    r.eval_time_s = seconds_since(eval_start);
    r.elapsed_s = seconds_since(run_start);
    r.gather_wait_s = gather_wait;
    if (reporter) {
      if (metrics != nullptr) metrics->write(to_json(r));
      progress.epoch(r);
    }
    summary.last = r;
    if (checkpoint_after_period) {
      // Recorded: nothing of this period is carried into the next.
      sums.reset_period_and_window();
      at.window_samples = 0;
      if (!checkpoint()) return summary;
    }
    if (stop_after_period) return stopped();
    if (callback_stop()) break;
  }
  if (checkpoints && saved_step != at.step && !checkpoint()) return summary;
  summary.steps = at.step;
  summary.mean_epoch_time_s =
      periods_run > 0 ? train_time / static_cast<double>(periods_run) : 0.0;
  return summary;
}

}  // namespace noeira
