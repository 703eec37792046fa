#include "train/language_model.hpp"

#include "kernels/error.hpp"

namespace noeira {

namespace {

void require(bool ok, std::string_view option, std::int64_t value, std::string_view why) {
  if (!ok) throw InputError(detail::concat("--", option, " ", value, ": ", why));
}

void check_split(const ResidentTokens& split, std::int64_t block, std::int64_t vocab) {
  if (split.count <= block) {
    throw InputError(detail::concat(split.name, ": ", split.count,
                                    " tokens, too few for one window of --block ", block,
                                    " + 1 tokens"));
  }
  NOEIRA_CHECK(split.vocab_size == vocab, split.name, ": a vocabulary of ", split.vocab_size,
               " where the training split has ", vocab);
}

// The options, once every one is checked: before any member is built from them.
const LanguageModelOptions& checked(const LanguageModelOptions& o, const ResidentTokens& train,
                                    const ResidentTokens& validation) {
  require(o.steps > 0, "steps", o.steps, "must be positive");
  require(o.steps <= UINT32_MAX, "steps", o.steps, "exceeds the window draws' 2^32 steps");
  require(o.eval_every > 0 && o.eval_every <= o.steps, "eval-every", o.eval_every,
          detail::concat("must be in [1, --steps ", o.steps, "]"));
  require(o.steps % o.eval_every == 0, "steps", o.steps,
          detail::concat("is not a multiple of --eval-every ", o.eval_every,
                         " (each period of --eval-every steps ends with an evaluation)"));
  require(o.eval_batches > 0, "eval-batches", o.eval_batches, "must be positive");
  require(o.batch > 0, "batch", o.batch, "must be positive");
  require(o.block > 0, "block", o.block, "must be positive");
  check_split(train, o.block, train.vocab_size);
  check_split(validation, o.block, train.vocab_size);
  NOEIRA_CHECK(validation.ids.target() == train.ids.target(),
               "LanguageModelTask: ", validation.name, " is on another target than ", train.name);
  return o;
}

}  // namespace

LanguageModelTask::LanguageModelTask(const ResidentTokens& train, const ResidentTokens& validation,
                                     const LanguageModelOptions& options)
    : train_(train),
      validation_(validation),
      options_(checked(options, train, validation)),
      windows_(options.batch, options.block, train.ids.target()),
      batch_(train.ids.target()),
      eval_batch_(train.ids.target()),
      loss_(options.loss) {
  const LanguageModelOptions& o = options_;
  // The validation windows are the same at every evaluation and for any world size: batch e
  // of the validation stream, drawn once.
  if (validation.shards != nullptr) {
    eval_starts_wide_ = wide_window_starts(o.seed, WindowStream::Validation, 0, o.eval_batches,
                                           o.batch, validation.count, o.block);
  } else {
    eval_starts_ =
        Tensor::from_host_ids({o.eval_batches * o.batch},
                              window_starts(o.seed, WindowStream::Validation, 0, o.eval_batches,
                                            o.batch, validation.count, o.block),
                              train.ids.target());
  }
  if (train.shards == nullptr) {
    train_starts_ = Tensor({o.eval_every * o.batch}, train.ids.target(), DType::I32);
  }
}

void LanguageModelTask::gather(WindowBatch& out, const ResidentTokens& split, const Tensor& starts,
                               const std::vector<std::int64_t>& wide_starts, RowRange rows,
                               Stream stream) {
  if (split.shards != nullptr) {
    windows_.gather_from_shards(out, split, wide_starts, rows.begin, rows.size(), stream);
  } else {
    windows_.gather(out, split, starts, rows.begin, rows.size(), stream);
  }
}

void LanguageModelTask::begin_period(std::int64_t period, Target target) {
  // Not bounded by periods(): a run of TrainConfig::periods_this_run past them draws the windows
  // of the periods that follow, as a longer run would.
  NOEIRA_CHECK(period >= 0, "begin_period: period ", period);
  NOEIRA_CHECK(target == train_.ids.target(), "begin_period: the run is on ", to_string(target),
               " but ", train_.name, " on ", to_string(train_.ids.target()));
  if (train_.shards != nullptr) {
    train_starts_wide_ = wide_window_starts(options_.seed, WindowStream::Train,
                                            period * options_.eval_every, options_.eval_every,
                                            options_.batch, train_.count, options_.block);
  } else {
    // Into the same storage every period: freeing device memory would synchronize the device.
    train_starts_.copy_from_ids(window_starts(options_.seed, WindowStream::Train,
                                              period * options_.eval_every, options_.eval_every,
                                              options_.batch, train_.count, options_.block));
  }
  period_ = period;
}

StepRows LanguageModelTask::load(std::int64_t s, int rank, int world, Stream stream,
                                 MicroBatch micro) {
  NOEIRA_CHECK(period_ >= 0, "LanguageModelTask::load before begin_period");
  NOEIRA_CHECK(s >= 0 && s < options_.eval_every, "LanguageModelTask::load: step ", s,
               " of a period of ", options_.eval_every);
  check_batch_covers_ranks(options_.batch, world, micro.count);
  StepRows rows;
  rows.global = RowRange{s * options_.batch, (s + 1) * options_.batch};  // into train_starts_
  rows.mine = local_rows(local_rows(rows.global, micro.index, micro.count), rank, world);
  rows.global_targets = tokens_per_batch();
  gather(batch_, train_, train_starts_, train_starts_wide_, rows.mine, stream);
  return rows;
}

Tensor LanguageModelTask::token_logits(const Tensor& output, std::int64_t tokens) const {
  const std::int64_t vocab = train_.vocab_size;
  const std::int64_t width = output.rank() >= 2 ? output.dim(output.rank() - 1) : 0;
  if (width < vocab || output.numel() != tokens * width) {
    throw InputError(detail::concat("LanguageModelTask: the model's output of shape ",
                                    shape_string(output.shape()), " is not logits [", tokens,
                                    " tokens, V >= ", vocab, "] (or [rows, block, V])"));
  }
  return output.view({tokens, width});
}

void LanguageModelTask::loss(Context& ctx, const Tensor& output, float grad_scale,
                             double* loss_sum) {
  const Tensor logits = token_logits(output, batch_.targets.numel());
  loss_.forward_backward(ctx, logits, batch_.targets, grad_scale, loss_sum);
  grad_ = loss_.grad().view(output.shape());
}

}  // namespace noeira
