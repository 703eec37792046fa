#pragma once
// The language-modelling task (train/task.hpp): next-token prediction on windows of a token
// stream (train/text_windows.hpp), softmax cross-entropy over every position, and the mean loss
// over a fixed set of validation windows.
//
// A run is `steps` optimizer steps; a period is `eval_every` of them, each ending with an
// evaluation, so periods() = steps / eval_every. A `steps` that eval_every does not divide is an
// InputError rather than a run that quietly trains more or fewer steps than asked (the trainer's
// periods all have the same number of steps, which its resume arithmetic relies on).
//
// Step s of the run (period · eval_every + the step in the period) reads `batch` windows whose
// starts are window_start(seed, Train, s, row); rank r of N takes rows [r·B/N, (r+1)·B/N). The
// model reads input() = [rows, block] I32 token ids and returns logits of [rows, block, V] or
// [rows · block, V] (the same memory): the loss reads them as [rows · block, V], one row per
// target token, with V at least the vocabulary (a padded vocabulary's extra logits only ever
// receive the softmax's gradient). The gradient is the mean over the global batch's
// batch · block target tokens.
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/module.hpp"
#include "distributed/host_collectives.hpp"
#include "distributed/policy.hpp"
#include "distributed/units.hpp"
#include "loss/cross_entropy.hpp"
#include "train/batch.hpp"
#include "train/metrics.hpp"
#include "train/task.hpp"
#include "train/text_windows.hpp"

namespace noeira {

struct LanguageModelOptions {
  std::int64_t steps = 0;         // optimizer steps of the run, a multiple of eval_every
  std::int64_t eval_every = 0;    // steps per period; an evaluation ends each
  std::int64_t eval_batches = 0;  // batches of `batch` validation windows per evaluation
  std::int64_t batch = 0;         // windows per global batch (all ranks together)
  std::int64_t block = 0;         // tokens per window: the model's context length
  std::uint64_t seed = 0;         // the window draws (train/text_windows.hpp)
  // Each validation batch is evaluated in this many pieces (MicroBatch slices), so that a run
  // with --accum never computes on more rows at once than a training micro-batch holds.
  int eval_micro_batches = 1;
  // The training and validation loss. Windows are full, so nothing needs ignoring; an ignored
  // target would still count in the mean's divisor (batch · block).
  CrossEntropyOptions loss;
};

class LanguageModelTask {
 public:
  // The splits stay the caller's and must outlive the task; both live on the run's target.
  // Options out of range, or a split shorter than block + 1 tokens, are an InputError.
  LanguageModelTask(const ResidentTokens& train, const ResidentTokens& validation,
                    const LanguageModelOptions& options);

  std::int64_t periods() const { return options_.steps / options_.eval_every; }
  std::int64_t steps_per_period() const { return options_.eval_every; }
  std::int64_t period_targets() const { return options_.eval_every * tokens_per_batch(); }
  std::int64_t targets_per_sample() const { return options_.block; }
  RecordLabels labels() const {
    return {"eval", "val", "tokens_per_s", "tokens/s", static_cast<double>(options_.block),
            "train_time_s"};
  }
  // The training split's tokens: what a resumed run checks it trains on the same text.
  std::int64_t train_samples() const { return train_.count; }
  std::int64_t tokens_per_batch() const { return options_.batch * options_.block; }

  // Uploads the window starts of the period's steps: each step is then a gather on the target.
  void begin_period(std::int64_t period, Target target);
  StepRows load(std::int64_t s, int rank, int world, Stream stream, MicroBatch micro = {});
  const Tensor& input() const { return batch_.ids; }
  // The next token of each input position: [rows · block] I32, what loss() scores against.
  const Tensor& targets() const { return batch_.targets; }

  void loss(Context& ctx, const Tensor& output, float grad_scale, double* loss_sum);
  // The gradient of the last loss() in the shape of the model's output.
  const Tensor& loss_grad() const { return grad_; }

  // The mean loss per target token over the validation set (accuracy NaN, samples = tokens).
  // Collective with a policy: every rank runs eval_batches forwards, one with a single row
  // where the batch leaves it none (ZeRO-3's gathers need every rank), and counts its rows only.
  template <Module M>
  EvalResult evaluate(M& model, Context& ctx, dist::ShardingPolicy* policy);

 private:
  // The output as [tokens, V] logits for the loss; an InputError when it is not that.
  Tensor token_logits(const Tensor& output, std::int64_t tokens) const;
  // The windows of starts [rows) of a split: from its resident ids, or read from its shards.
  void gather(WindowBatch& out, const ResidentTokens& split, const Tensor& starts,
              const std::vector<std::int64_t>& wide_starts, RowRange rows, Stream stream);

  const ResidentTokens& train_;
  const ResidentTokens& validation_;
  LanguageModelOptions options_;
  WindowGather windows_;
  std::int64_t period_ = -1;  // the period whose starts are resident
  Tensor train_starts_;       // [eval_every · batch] I32: the period's window starts
  Tensor eval_starts_;        // [eval_batches · batch] I32: the fixed validation windows
  // The same starts on the host, for a split of token shards (train/text_windows.hpp).
  std::vector<std::int64_t> train_starts_wide_;
  std::vector<std::int64_t> eval_starts_wide_;
  WindowBatch batch_;         // this rank's rows of the current training batch
  WindowBatch eval_batch_;    // this rank's rows of the current validation batch
  CrossEntropyLoss loss_;
  Tensor grad_;  // loss_.grad() viewed in the output's shape
};

template <Module M>
EvalResult LanguageModelTask::evaluate(M& model, Context& ctx, dist::ShardingPolicy* policy) {
  const int rank = policy != nullptr ? policy->group().rank() : 0;
  const int world = policy != nullptr ? policy->group().size() : 1;
  const Mode saved = ctx.mode;
  ctx.mode = Mode::Eval;
  CrossEntropyLoss loss(options_.loss);
  Tensor loss_sum({1}, ctx.target, DType::F64);
  const int pieces = options_.eval_micro_batches;
  for (std::int64_t e = 0; e < options_.eval_batches * pieces; ++e) {
    const RowRange batch{e / pieces * options_.batch, (e / pieces + 1) * options_.batch};
    const RowRange global = local_rows(batch, static_cast<int>(e % pieces), pieces);
    const RowRange own = local_rows(global, rank, world);
    // A rank without rows still runs the forward (ZeRO-3 gathers) and counts nothing.
    const bool idle = own.size() == 0;
    const RowRange mine = rows_to_compute(own, global);
    gather(eval_batch_, validation_, eval_starts_, eval_starts_wide_, mine, ctx.stream);
    const Tensor& out = policy != nullptr
                            ? dist::forward_units(model, ctx, eval_batch_.ids, *policy)
                            : model.forward(ctx, eval_batch_.ids);
    if (idle) continue;
    loss.forward(ctx, token_logits(out, eval_batch_.targets.numel()), eval_batch_.targets,
                 loss_sum.as<double>());
  }
  ctx.mode = saved;
  double sum = loss_sum.to_host<double>()[0];  // the one synchronization of an evaluation
  if (policy != nullptr) sum = dist::sum_over_ranks(policy->group(), sum);
  const std::int64_t tokens = options_.eval_batches * tokens_per_batch();
  EvalResult result;
  result.loss = sum / static_cast<double>(tokens);
  result.samples = tokens;
  return result;
}

}  // namespace noeira
