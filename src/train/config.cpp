#include "train/config.hpp"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "distributed/grad_reducer.hpp"
#include "kernels/error.hpp"
#include "train/augment.hpp"
#include "train/dataset.hpp"

namespace noeira {

std::string_view to_string(LogFormat format) { return kLogFormatNames.name_of(format); }

LogFormat parse_log_format(std::string_view name) { return kLogFormatNames.parse(name); }

nlohmann::json to_json(const TrainConfig& c) {
  nlohmann::json j{
      {"model", c.model},         {"data", to_string(c.data)},
      {"data-dir", c.data_dir},
      {"batch", c.batch},         {"accum", c.accum},
      {"optimizer", kOptimizerNames.name_of(c.optimizer)}, {"lr", c.lr},
      {"momentum", c.momentum},   {"beta1", c.beta1},
      {"beta2", c.beta2},         {"weight-decay", c.weight_decay},
      {"schedule", kScheduleNames.name_of(c.schedule)},   {"warmup", c.warmup},
      {"min-lr", c.min_lr},       {"grad-clip", c.grad_clip},
      {"seed", c.seed},           {"threads", c.threads},
      {"device", kDeviceNames.name_of(c.device)},       {"allow-tf32", c.allow_tf32},
      {"precision", kPrecisionNames.name_of(c.precision)},
      {"log-format", std::string(to_string(c.log_format))},
      {"log-every", c.log_every},
      {"policy", dist::kPolicyNames.name_of(c.policy)},       {"sim-ranks", c.sim_ranks},
      {"sim-ranks-per-node", c.sim_ranks_per_node},
      {"bucket-mb", c.bucket_mb}, {"reduce-dtype", kReduceDtypeNames.name_of(c.reduce_dtype)},
      {"grad-dtype", kGradDtypeNames.name_of(c.grad_dtype)},
      {"watchdog-timeout", c.watchdog_timeout},
      {"zero3-persist-below", c.zero3_persist_below},
      {"no-zero3-prefetch", c.no_zero3_prefetch},
      {"checkpoint-activations", c.checkpoint_activations},
      {"fp32-activations", c.fp32_activations},
      {"batchnorm", kBatchNormNames.name_of(c.batchnorm)},
      {"report-memory", c.report_memory},
      {"checkpoint-dir", c.checkpoint_dir}, {"checkpoint-every", c.checkpoint_every},
      {"keep-last", c.keep_last},
      {"init-from", c.init_from}, {"names", c.names ? kNameSchemeNames.name_of(*c.names) : std::string_view()},
  };
  // Only the options of the run's task, so that the file given back with --config names none
  // that the task refuses.
  if (is_text(c)) {
    j.update({{"text-file", c.text_file},
              {"tokenizer", kTokenizerNames.name_of(c.tokenizer)},
              {"steps", c.steps},
              {"eval-every", c.eval_every},
              {"eval-batches", c.eval_batches},
              {"block", c.block},
              {"new-vocabulary", c.new_vocabulary}});
  } else {
    j.update({{"stream-data", c.stream_data},
              {"normalize", kNormalizeNames.name_of(c.normalize)},
              {"loss", kLossNames.name_of(c.loss)},
              {"feature-scale", c.feature_scale},
              {"feature-shift", c.feature_shift},
              {"train-x", c.train_x},
              {"train-y", c.train_y},
              {"test-x", c.test_x},
              {"test-y", c.test_y},
              {"limit-train", c.limit_train},
              {"limit-test", c.limit_test},
              {"epochs", c.epochs},
              {"eval-batch", c.eval_batch},
              {"augment", kAugmentNames.name_of(c.augment)},
              {"crop-padding", c.crop_padding}});
  }
  return j;
}

OptimizerConfig optimizer_config(const TrainConfig& c) {
  OptimizerConfig o;
  o.kind = c.optimizer;
  o.lr = static_cast<float>(c.lr);
  o.momentum = static_cast<float>(c.momentum);
  o.beta1 = static_cast<float>(c.beta1);
  o.beta2 = static_cast<float>(c.beta2);
  o.weight_decay = static_cast<float>(c.weight_decay);
  return o;
}

void check_schedule(const TrainConfig& c, std::int64_t total_steps) {
  if (c.schedule != ScheduleKind::WarmupCosine) return;
  if (c.warmup >= total_steps) {
    throw InputError(detail::concat("--warmup ", c.warmup, " is not shorter than the run's ",
                                    total_steps, " steps: --schedule warmup_cosine decays after "
                                    "its warmup (give a shorter --warmup or a longer run)"));
  }
  if (c.min_lr > c.lr) {
    throw InputError(detail::concat("--min-lr ", c.min_lr, " is above --lr ", c.lr,
                                    ": warmup_cosine decays from --lr down to --min-lr"));
  }
}

LrSchedule lr_schedule(const TrainConfig& c, std::int64_t total_steps) {
  check_schedule(c, total_steps);
  LrSchedule s;
  s.kind = c.schedule;
  s.base_lr = static_cast<float>(c.lr);
  s.warmup_steps = c.warmup;
  s.total_steps = total_steps;
  s.min_lr = static_cast<float>(c.min_lr);
  s.validate();
  return s;
}

Target parse_device(std::string_view name) { return kDeviceNames.parse(name); }

Precision parse_precision(std::string_view name) { return kPrecisionNames.parse(name); }

DType parse_reduce_dtype(std::string_view name) { return kReduceDtypeNames.parse(name); }

DType parse_grad_dtype(std::string_view name) { return kGradDtypeNames.parse(name); }

namespace {

// --normalize, --feature-scale and --feature-shift (train/feature_normalization.hpp).
void validate_normalization(const TrainConfig& c) {
  if (!(std::isfinite(c.feature_scale) && c.feature_scale != 0.0)) {
    throw InputError(detail::concat("--feature-scale must be a finite number other than 0, got ",
                                    c.feature_scale));
  }
  if (!std::isfinite(c.feature_shift)) {
    throw InputError(detail::concat("--feature-shift must be finite, got ", c.feature_shift));
  }
  const bool scaled = c.feature_scale != 1.0 || c.feature_shift != 0.0;
  const bool standardize = c.normalize == FeatureNormalize::Standardize;
  if (standardize && scaled) {
    throw InputError("--normalize standardize and --feature-scale/--feature-shift: standardizing "
                     "undoes any scale and shift; give one or the other");
  }
  if ((standardize || scaled) && (is_text(c) || holds_pixels(c.data))) {
    throw InputError(detail::concat(
        standardize ? "--normalize" : "--feature-scale/--feature-shift",
        " applies to a user's arrays (--data npy, h5 or arrays), not --data ", to_string(c.data),
        is_text(c) ? "" : " (its images are normalized by the data set's published statistics)"));
  }
}

// Whether --resume names a checkpoint of --checkpoint-dir: `latest`, the directory, its `latest`
// file or a step directory in it.
bool resumes_from_checkpoint_dir(const TrainConfig& c) {
  if (c.resume.empty()) return false;
  if (c.resume == "latest") return true;
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::weakly_canonical(c.checkpoint_dir, ec);
  std::filesystem::path at = std::filesystem::weakly_canonical(c.resume, ec);
  for (; !at.empty() && at != at.root_path(); at = at.parent_path()) {
    if (at == dir) return true;
  }
  return false;
}

}  // namespace

void validate(const TrainConfig& c) {
  if (c.grad_dtype == DType::BF16) {
    // Said here, before anything is built: the reducer and the store refuse the same.
    if (c.reduce_dtype != DType::BF16) {
      throw InputError(
          "--grad-dtype bf16 reduces the gradients as they are held, in bf16 with fp32 sums: "
          "add --reduce-dtype bf16");
    }
    if (c.accum > 1) throw InputError(dist::bf16_grads_accum_refusal(c.accum));
  }
  auto positive = [](std::int64_t v, const char* flag) {
    if (v <= 0) throw InputError(detail::concat("--", flag, " must be positive, got ", v));
  };
  auto non_negative = [](double v, const char* flag) {
    if (!(v >= 0.0)) throw InputError(detail::concat("--", flag, " must be >= 0, got ", v));
  };
  positive(c.epochs, "epochs");
  positive(c.steps, "steps");
  positive(c.eval_every, "eval-every");
  positive(c.eval_batches, "eval-batches");
  // Before anything is loaded (the text task checks the same when it is built).
  if (is_text(c) && (c.eval_every > c.steps || c.steps % c.eval_every != 0)) {
    throw InputError(detail::concat("--eval-every ", c.eval_every, " does not divide --steps ",
                                    c.steps, " (each period of --eval-every steps ends with an "
                                    "evaluation)"));
  }
  non_negative(static_cast<double>(c.block), "block");
  positive(c.batch, "batch");
  positive(c.eval_batch, "eval-batch");
  positive(c.accum, "accum");
  if (c.accum > c.batch) {
    throw InputError(detail::concat("--accum ", c.accum, " is more micro-batches than the ",
                                    c.batch, " rows of --batch"));
  }
  non_negative(static_cast<double>(c.limit_train), "limit-train");
  non_negative(static_cast<double>(c.limit_test), "limit-test");
  validate_normalization(c);
  if (c.loss != LossChoice::Auto && is_text(c)) {
    throw InputError(detail::concat("--loss ", kLossNames.name_of(c.loss),
                                    " does not apply to --data text (a language model's loss is "
                                    "the next token's cross-entropy)"));
  }
  non_negative(static_cast<double>(c.crop_padding), "crop-padding");
  non_negative(static_cast<double>(c.log_every), "log-every");
  non_negative(static_cast<double>(c.warmup), "warmup");
  non_negative(c.grad_clip, "grad-clip");
  non_negative(static_cast<double>(c.threads), "threads");
  non_negative(static_cast<double>(c.sim_ranks), "sim-ranks");
  non_negative(static_cast<double>(c.checkpoint_every), "checkpoint-every");
  if (c.new_vocabulary && c.init_from.empty()) {
    throw InputError("--new-vocabulary applies to --init-from (a language model to start from)");
  }
  if (c.resume == "latest" && c.checkpoint_dir.empty()) {
    throw InputError("--resume latest needs --checkpoint-dir (where to look for `latest`)");
  }
  // A run may start from a checkpoint elsewhere and replace the directory's (a trainer that
  // loads another state, train/fit.hpp); not continue and discard the same ones.
  if (c.overwrite_checkpoints &&
      (c.checkpoint_dir.empty() || resumes_from_checkpoint_dir(c))) {
    throw InputError(c.checkpoint_dir.empty()
                         ? "--overwrite-checkpoints needs --checkpoint-dir (what to overwrite)"
                         : "--overwrite-checkpoints and --resume of a checkpoint in "
                           "--checkpoint-dir: a run either continues the checkpoints or replaces "
                           "them, not both");
  }
  // A ZeRO-3 flag given under another policy would do nothing: say why instead.
  auto require_zero3 = [&](bool given, const char* flag, const char* others) {
    if (given && c.policy != dist::Policy::Zero3) {
      throw InputError(detail::concat(flag, " applies to --policy zero3 only (the other policies ",
                                      others, "), not to --policy ", dist::to_string(c.policy)));
    }
  };
  require_zero3(c.zero3_persist_below > 0, "--zero3-persist-below", "hold every parameter whole");
  require_zero3(c.no_zero3_prefetch, "--no-zero3-prefetch", "gather no parameters");
  if (c.fp32_activations && c.precision != Precision::Bf16) {
    throw InputError(detail::concat("--fp32-activations applies to --precision bf16 only (under ",
                                    kPrecisionNames.name_of(c.precision),
                                    " every activation is fp32 already)"));
  }
  if (!(c.bucket_mb > 0.0)) {
    throw InputError(detail::concat("--bucket-mb must be positive, got ", c.bucket_mb));
  }
  // The watchdog counts whole milliseconds: less would round to no timeout at all.
  if (!(c.watchdog_timeout >= 0.001 && c.watchdog_timeout <= 1e6)) {
    throw InputError(detail::concat("--watchdog-timeout must be from 0.001 to 1e6 seconds, got ",
                                    c.watchdog_timeout));
  }
  if (!(c.lr > 0.0)) throw InputError(detail::concat("--lr must be positive, got ", c.lr));
}

}  // namespace noeira
