#pragma once
// One training step, top to bottom (docs/design.md, "One training step"):
//   batch -> forward -> loss -> vjp -> reduce -> clip -> optimizer step
// (the first four once per micro-batch where the step accumulates gradients, --accum).
// Logging, evaluation and checkpoints are the trainer's (train/trainer.hpp), around it.
//
// Nothing here waits for the device: the loss is added to sums that stay in the target's memory
// (LossSums), and the host reads them only on logged steps. The synchronizations that remain are
// the collectives the policy needs and, when asked for, the gradient norm.
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/module.hpp"
#include "distributed/policy.hpp"
#include "distributed/units.hpp"
#include "optim/optimizer.hpp"
#include "train/order.hpp"
#include "train/task.hpp"

namespace noeira {

// The running loss sums of this rank's rows, in the target's memory (F64): the period's (epoch's)
// and the log window's. A step's sum goes into a scratch double first and is then added to both,
// so each of them is the same left fold of step sums however often it is read.
class LossSums {
 public:
  LossSums(Target target, double period, double window);
  // Where the task adds this step's loss sum; zeroed (on the stream) for each step.
  double* begin_step(Context& ctx);
  // Adds the step's sum to the period and window sums.
  void end_step(Context& ctx);
  // The host reads: each waits for the device (the values are needed on the host now).
  double period() const;
  double window() const;
  void reset_period_and_window();
  void reset_window();

 private:
  Tensor sums_;  // [3] F64: step, period, window
};

struct StepSettings {
  float lr = 0.0f;
  double grad_clip = 0.0;  // > 0: clip to this global norm
  bool want_norm = false;  // compute the norm without clipping (a logged step)
  int accum = 1;           // micro-batches per optimizer step (--accum)
};

struct StepResult {
  double grad_norm = std::numeric_limits<double>::quiet_NaN();  // before clipping; NaN: not asked
  RowRange global;  // the step's global batch
};

// Global step s of the task's current period, over settings.accum micro-batches.
template <Module M, class Task>
StepResult train_step(M& model, Context& ctx, Task& task, std::int64_t s,
                      dist::ShardingPolicy& policy, Optimizer& optimizer, LossSums& sums,
                      const StepSettings& settings) {
  dist::ProcessGroup& group = policy.group();
  StepResult result;
  for (int k = 0; k < settings.accum; ++k) {
    // 1. the batch (task.load) is this rank's rows of micro-batch k of the global batch; dropout
    //    masks follow the global row, so they do not depend on the micro-batches either
    const StepRows rows =
        task.load(s, group.rank(), group.size(), ctx.stream, MicroBatch{k, settings.accum});
    result.global = rows.global;
    ctx.row_offset = rows.mine.begin - rows.global.begin;
    const bool idle = rows.mine.size() == 0;
    ctx.stand_in_rows = idle;  // not counted in batch statistics
    // Full gradients add up over the micro-batches in the leaves themselves.
    const ScopedSetting<GradMode> mode(ctx.grad_mode, policy.begin_micro_batch(k, settings.accum));

    // 2. forward; ZeRO-3 gathers each unit's parameters just before it runs
    const Tensor& output = dist::forward_units(model, ctx, task.input(), policy);

    // 3. loss; the gradient is the mean over the GLOBAL batch's targets, whatever this rank's and
    //    this micro-batch's share, so the sum over ranks and micro-batches is the global mean. A
    //    rank that a short last batch left without rows computed on a stand-in row
    //    (rows_to_compute): a gradient scale of 0 makes its contribution exactly zero, and its loss
    //    is not summed.
    const float grad_scale = idle ? 0.0f : 1.0f / static_cast<float>(rows.global_targets);
    task.loss(ctx, output, grad_scale, sums.begin_step(ctx));
    if (!idle) sums.end_step(ctx);

    // 4. backward; each unit's gradient reduction starts as soon as its vjp is done (with
    //    accumulation: see distributed/grad_reducer.hpp for which micro-batches reduce)
    dist::vjp_units(model, ctx, task.loss_grad(), InputGrad::Skip, policy);
  }

  // 5. wait for every gradient reduction: this rank's owned gradients are now global sums
  policy.reduce_gradients();

  // 6. clip by the global norm (per-shard sums of squares, one scalar allreduce: a host
  //    synchronization, as is the norm of a logged step)
  if (settings.grad_clip > 0.0) {
    result.grad_norm = policy.clip_grad_norm(settings.grad_clip);
  } else if (settings.want_norm) {
    result.grad_norm = std::sqrt(policy.grad_sum_squares());
  }

  // 7. optimizer step over what this rank owns (ZeRO-1/2 then all-gather the parameters)
  policy.step(optimizer, settings.lr);
  return result;
}

}  // namespace noeira
