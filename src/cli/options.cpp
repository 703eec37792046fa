#include "cli/options.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cli/bounds.hpp"
#include "cli/choice_option.hpp"
#include "cli/json_config.hpp"
#include "distributed/residency.hpp"
#include "kernels/error.hpp"
#include "train/augment.hpp"
#include "train/dataset.hpp"
#include "train/model_catalogue.hpp"
#include "train/run.hpp"
#include "train/name_map.hpp"
#include "train/tokenizer.hpp"

namespace noeira::cli {

namespace {

// What a flag may be. Counts reach far beyond any real run yet stay small enough that their
// products (epochs x steps per epoch, steps x batch rows, rows x features) are nowhere near
// int64's limit, so the trainer's arithmetic never overflows.
constexpr std::int64_t kMaxSteps = 1'000'000'000;    // steps, step intervals, warmup
constexpr std::int64_t kMaxSamples = 1'000'000'000;  // --limit-train, --limit-test
constexpr std::int64_t kMaxEpochs = 1'000'000;
constexpr std::int64_t kMaxRows = 1'000'000;         // batches, windows, tokens per window
constexpr std::int64_t kMaxThreads = 1024;
constexpr std::int64_t kMaxSimRanks = 256;           // threads of one process
constexpr std::int64_t kMaxCropPadding = 1024;       // pixels; far beyond any image we read
// Learning rates are float32: below 1e-12 an update vanishes against any weight; 1e30 keeps
// lr x gradient inside float's range for the step that shows the run diverging.
constexpr double kMinLr = 1e-12;
constexpr double kMaxLr = 1e30;
constexpr double kMaxBeta = 0.999999;  // at 1, Adam's bias correction divides by zero
constexpr double kMaxWeightDecay = 1e3;
// The watchdog counts whole milliseconds.
constexpr double kMinWatchdogSeconds = 0.001;
constexpr double kMaxWatchdogSeconds = 1e6;

// The models --model may name: the program's catalogue (the presets, for noeira itself).
std::string model_list() {
  std::string s;
  for (const ModelEntry& m : model_catalogue().entries()) {
    s += "\n    ";
    s += m.name;
    s += ": ";
    s += m.description;
  }
  return s;
}

// --<split>-x and --<split>-y, the arrays --data arrays names for one split.
void add_split_arrays(CLI::App& a, const std::string& split, std::string& x, std::string& y) {
  a.add_option("--" + split + "-x", x,
               "arrays: the " + split + " features: file.npy, file.npz:x, file.h5:/group/x, or "
               "shards of these joined by commas (read as one array, rows in turn)");
  a.add_option("--" + split + "-y", y,
               "arrays: the " + split + " labels (integers) or regression targets (floats), "
               "named as --" + split + "-x");
}

// Options shared by train and eval.
void add_common_options(Command& c) {
  CLI::App& a = *c.app;
  TrainConfig& t = c.config;
  a.add_option("--config", c.config_file,
               "JSON file of options (keys are option names); flags given here override it");
  add_choice(a, "--data", t.data, kDatasetNames,
               "Data set: images to classify; your own arrays to classify (integer y) or regress "
               "(float y): npy (--data-dir holds train_x.npy, train_y.npy, test_x.npy, "
               "test_y.npy), h5 (train.h5 and test.h5, each with datasets /x and /y) or arrays "
               "(named one by one: --train-x, --train-y, --test-x, --test-y); or text for a "
               "language model (a GPT preset), or tokens: token shards that noeira tokenize "
               "wrote (a gpt2-* preset)");
  a.add_option("--data-dir", t.data_dir,
               "Directory of the data set's files (empty: /usr/share/datasets/fashion-mnist, "
               "/usr/share/datasets/mnist or /usr/share/datasets/cifar-10-batches-bin; npy, h5: "
               "required; text: a directory of text files, default /usr/share/games/fortunes; "
               "tokens: the shards' directory, required)");
  add_split_arrays(a, "test", t.test_x, t.test_y);
  a.add_flag("--stream-data", t.stream_data,
             "npy, h5, arrays: read each batch's rows from the files instead of holding the "
             "features in memory (data larger than memory; the same numbers, slower); done anyway "
             "where holding them would take over a quarter of the memory available");
  a.add_option("--text-file", t.text_file,
               "text: one corpus file (e.g. TinyShakespeare's input.txt) instead of --data-dir");
  add_choice(a, "--tokenizer", t.tokenizer, kTokenizerNames,
               "text: char (the training text's characters), byte (256 ids) or gpt2 (GPT-2's "
               "BPE); tokens: gpt2 (default) or byte");
  a.add_option("--limit-test", t.limit_test, "Evaluate on the first N test samples only (0: all)")
      ->check(whole_in(0, kMaxSamples));
  a.add_option("--threads", t.threads, "OpenMP and OpenBLAS threads (0: all cores)")
      ->check(whole_in(0, kMaxThreads));
  add_choice(a, "--device", t.device, kDeviceNames,
               "cpu, or cuda: tensors on the GPU (one per MPI rank, NCCL between them; "
               "--sim-ranks N simulates N ranks on one GPU)");
  a.add_flag("--allow-tf32", t.allow_tf32,
             "cuda: TF32 tensor cores for matrix products (faster, 10-bit mantissa inputs)");
  add_choice(a, "--precision", t.precision, kPrecisionNames,
               "fp32, or bf16: mixed precision (the layers compute with a bf16 copy of the "
               "parameters and the matrix products round their operands to bfloat16, fp32 "
               "accumulation; fp32 masters, gradients, optimizer state and checkpoints; cpu: "
               "oneDNN, cuda: cuBLASLt and cuDNN)");
  add_optional_choice(a, "--names", t.names, kNameSchemeNames,
                      "Name map of a .safetensors read (--init-from, --params): noeira or "
                      "pytorch (empty: the one the file's metadata names, else what its tensor "
                      "names show)");
  a.add_flag("--allow-non-finite", t.allow_non_finite,
             "Save and load parameters that hold NaN or infinity (refused by default)");
  a.add_option("--log-format", c.log_format,
               "human: progress bar on a terminal, plain lines otherwise; json: JSON lines on "
               "stdout")
      ->check(CLI::IsMember(kLogFormatNames.names()));
}

// The defaults of a language-model run (--data text), nanoGPT's CPU run of a character-level
// model: applied to every option the command line and the config file leave unset.
const std::vector<std::pair<std::string, std::string>>& text_defaults() {
  static const std::vector<std::pair<std::string, std::string>> defaults = {
      {"--model", "gpt-char"},     {"--optimizer", "adamw"},      {"--lr", "1e-3"},
      {"--beta2", "0.99"},
      {"--batch", "12"},           {"--weight-decay", "0.1"},     {"--grad-clip", "1"},
      {"--schedule", "warmup_cosine"}, {"--log-every", "50"},
  };
  return defaults;
}

// CIFAR-10's usual pipeline (He et al.; torchvision's RandomCrop(32, padding=4) and
// RandomHorizontalFlip()). The 28x28 data sets keep TrainConfig's: no augmentation, and a padding
// of 2 (a 32x32 image's 4 scaled to 28 pixels, rounded down) for crop-flip when it is asked for.
const std::vector<std::pair<std::string, std::string>>& cifar_defaults() {
  static const std::vector<std::pair<std::string, std::string>> defaults = {
      {"--augment", "crop-flip"}, {"--crop-padding", "4"}};
  return defaults;
}

// The defaults of the run's data set, for the options the command line and the config file leave
// unset.
// The defaults of a run on token shards: the text run's, for GPT-2's ids and model.
const std::vector<std::pair<std::string, std::string>>& token_defaults() {
  static const std::vector<std::pair<std::string, std::string>> defaults = [] {
    std::vector<std::pair<std::string, std::string>> d = text_defaults();
    for (auto& [flag, value] : d) {
      if (flag == "--model") value = "gpt2-124m";
    }
    d.emplace_back("--tokenizer", "gpt2");
    return d;
  }();
  return defaults;
}

const std::vector<std::pair<std::string, std::string>>& data_set_defaults(const TrainConfig& t) {
  static const std::vector<std::pair<std::string, std::string>> none;
  if (t.data == DatasetKind::Tokens) return token_defaults();
  if (is_text(t)) return text_defaults();
  if (t.data == DatasetKind::Cifar10) return cifar_defaults();
  return none;
}

void set_threads(int threads) {
  const int n = threads > 0 ? threads : omp_get_num_procs();
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

bool given(const CLI::App& app, const std::string& flag) {
  const CLI::Option* opt = app.get_option_no_throw(flag);
  return opt != nullptr && opt->count() > 0;
}

// The flags that name --data arrays' arrays, with their values.
std::array<std::pair<std::string, const std::string*>, 4> array_flags(const TrainConfig& t) {
  return {{{"--train-x", &t.train_x},
           {"--train-y", &t.train_y},
           {"--test-x", &t.test_x},
           {"--test-y", &t.test_y}}};
}

// An option of the other task is a mistake worth saying, not a flag silently ignored.
void check_task_options(const CLI::App& app, const TrainConfig& t) {
  const std::vector<std::string> text_only = {"--steps",     "--eval-every", "--eval-batches",
                                              "--text-file", "--tokenizer",  "--block",
                                              "--new-vocabulary"};
  // (eval's --batch and --seed mean text windows; for images they are simply unused)
  std::vector<std::string> image_only = {"--epochs",     "--limit-train", "--limit-test",
                                         "--eval-batch", "--augment",     "--crop-padding"};
  for (const auto& [flag, value] : array_flags(t)) image_only.push_back(flag);
  for (const std::string& flag : is_text(t) ? image_only : text_only) {
    if (given(app, flag)) {
      throw InputError(detail::concat(flag, " does not apply to --data ", to_string(t.data),
                                      is_text(t) ? " (a text run is --steps long)"
                                                 : " (it is for --data text)"));
    }
  }
  // By value, not by whether given: a run's config.json holds every key, empty where unused.
  const bool arrays = t.data == DatasetKind::Arrays;
  for (const auto& [flag, value] : array_flags(t)) {
    if (!value->empty() && !is_text(t) && !arrays) {
      throw InputError(detail::concat(flag, " applies to --data arrays (not --data ", to_string(t.data),
                                      "), which names its arrays one by one"));
    }
  }
  if (t.data == DatasetKind::Tokens && t.tokenizer == TokenizerKind::Char) {
    throw InputError("--tokenizer char: token shards hold ids, not text; their tokenizer is gpt2 "
                     "(or byte, for shards of byte ids)");
  }
  // By value: a run's config.json holds the key, empty.
  if (t.data == DatasetKind::Tokens && !t.text_file.empty()) {
    throw InputError("--text-file applies to --data text; --data tokens reads the shards of "
                     "--data-dir");
  }
  if (t.stream_data && (is_text(t) || holds_pixels(t.data))) {
    throw InputError(detail::concat("--stream-data applies to a user's arrays (--data npy, h5 or "
                                    "arrays), not --data ", to_string(t.data)));
  }
  if (arrays && !t.data_dir.empty()) {
    throw InputError("--data-dir does not apply to --data arrays: --train-x, --train-y, --test-x "
                     "and --test-y name the arrays");
  }
  if (!is_text(t) && !holds_pixels(t.data) && t.augment != Augment::None) {
    throw InputError(detail::concat("--augment ", to_string(t.augment), " does not apply to --data ",
                                    to_string(t.data),
                                    ": its features are no images to crop and flip"));
  }
}

// The evaluation interval of a text run the user gave none: `preferred` steps, or the divisor of
// --steps nearest below it that is at least half of it (periods all have the same length,
// train/language_model.hpp); failing that, the run's length: one evaluation, at its end.
std::int64_t default_eval_every(std::int64_t steps, std::int64_t preferred) {
  const std::int64_t want = std::min(preferred, steps);
  for (std::int64_t d = want; d > 0 && 2 * d >= want; --d) {
    if (steps % d == 0) return d;
  }
  return steps;
}

// The text runs' floor of the cosine schedule when the user gives none: 1e-4 (nanoGPT's CPU
// run), or a tenth of a learning rate below 1e-3, so that it never exceeds --lr.
constexpr double kTextMinLr = 1e-4;

// A default never fails a run: those the user left unset adapt to what the user did set (the run's
// length, its learning rate, its number of ranks), and what the user set is checked against the
// rest here, in the flags' own words, before anything is loaded.
void adapt_defaults(Command& c, const std::set<std::string>& user_set) {
  if (c.app->get_name() != "train") return;
  TrainConfig& t = c.config;
  auto set_by_user = [&](const char* flag) { return user_set.contains(flag); };
  if (is_text(t)) {
    if (!set_by_user("--eval-every")) t.eval_every = default_eval_every(t.steps, t.eval_every);
    if (!set_by_user("--min-lr")) t.min_lr = std::min(kTextMinLr, t.lr / 10.0);
  }
  // Every rank needs a row of every micro-batch: a default batch grows to cover the ranks.
  const std::int64_t world = run_world(t);  // main() has initialized MPI under a launcher
  if (!set_by_user("--batch")) t.batch = std::max(t.batch, world * t.accum);
  if (is_text(t)) check_schedule(t, t.steps);  // an image run's length is known once loaded
}

}  // namespace

void add_train_command(CLI::App& app, Command& c) {
  c.app = app.add_subcommand(
      "train",
      "Train a model on a data set. With --data text the defaults are nanoGPT's CPU run "
      "of a character model: gpt-char, adamw lr 1e-3 to 1e-4 (warmup 100, cosine), beta2 0.99, "
      "weight decay 0.1, clipping 1.0, batch 12, 2000 steps");
  CLI::App& a = *c.app;
  TrainConfig& t = c.config;
  a.option_defaults()->always_capture_default();
  // The catalogue's first model is the default: mlp for noeira, a program's own model for it.
  t.model = model_catalogue().entries().front().name;
  a.add_option("--model", t.model,
               std::string(model_catalogue().find_if("gpt-char") != nullptr
                               ? "Model (with --data text the default is gpt-char):"
                               : "Model:") +
                   model_list());
  add_common_options(c);
  add_split_arrays(a, "train", t.train_x, t.train_y);
  a.add_option("--steps", t.steps, "text: optimizer steps of the run")
      ->check(whole_in(1, kMaxSteps));
  a.add_option("--eval-every", t.eval_every,
               "text: steps between evaluations of the validation loss, a divisor of --steps (default "
               "250, or the divisor of --steps nearest below it and at least half of it, else "
               "--steps: one evaluation at the end)")
      ->check(whole_in(1, kMaxSteps));
  a.add_option("--block", t.block,
               "text: tokens per window, up to the preset's block (0: the preset's)")
      ->check(whole_in(0, kMaxRows));
  a.add_option("--eval-batches", t.eval_batches,
               "text: batches of validation windows per evaluation (a fixed set)")
      ->check(whole_in(1, kMaxRows));
  a.add_option("--limit-train", t.limit_train, "Train on the first N samples only (0: all)")
      ->check(whole_in(0, kMaxSamples));
  a.add_option("--epochs", t.epochs, "Passes over the training set")
      ->check(whole_in(1, kMaxEpochs));
  a.add_option("--batch", t.batch, "Global batch size (all ranks together)")
      ->check(whole_in(1, kMaxRows));
  a.add_option("--accum", t.accum,
               "Gradient accumulation: micro-batches per optimizer step, each --batch/N rows "
               "(the global batch, data order and schedule stay as they are)")
      ->check(whole_in(1, kMaxRows));
  a.add_option("--eval-batch", t.eval_batch, "Batch size of the evaluation")
      ->check(whole_in(1, kMaxRows));
  add_choice(a, "--augment", t.augment, kAugmentNames,
               "Training images: crop-flip (a random crop of the image padded by --crop-padding "
               "black pixels, then a horizontal flip with probability 1/2; drawn per seed, epoch "
               "and sample, the same for any number of ranks) or none. Default none, crop-flip "
               "for cifar10; evaluation never augments");
  a.add_option("--crop-padding", t.crop_padding,
               "crop-flip: pixels of padding on every side (default 2, 4 for cifar10)")
      ->check(whole_in(0, kMaxCropPadding));
  add_choice(a, "--normalize", t.normalize, kNormalizeNames,
               "npy, h5, arrays: standardize (each feature by the training split's mean and "
               "standard deviation, recorded in model.h5 and applied by eval) or none");
  a.add_option("--feature-scale", t.feature_scale,
               "npy, h5, arrays: the model's inputs are x * scale + shift (e.g. 0.00392156862745098 "
               "= 1/255 for uint8 images); recorded in model.h5 as --normalize is");
  a.add_option("--feature-shift", t.feature_shift, "npy, h5, arrays: see --feature-scale");
  add_choice(a, "--loss", t.loss, kLossNames,
               "auto (cross-entropy for class labels, mse for float targets), cross-entropy, "
               "mse, or gaussian-nll (float targets: the model's outputs are a mean per target, "
               "then a variance per target, which must be positive; recorded in model.h5)");
  add_choice(a, "--optimizer", t.optimizer, kOptimizerNames, "sgd, adam or adamw");
  a.add_option("--lr", t.lr, "Base learning rate")->check(real_in(kMinLr, kMaxLr));
  a.add_option("--momentum", t.momentum, "SGD momentum (0: none)")->check(real_in(0.0, 1.0));
  a.add_option("--beta1", t.beta1, "Adam's first-moment decay")->check(real_in(0.0, kMaxBeta));
  a.add_option("--beta2", t.beta2, "Adam's second-moment decay")->check(real_in(0.0, kMaxBeta));
  a.add_option("--weight-decay", t.weight_decay,
               "Weight decay (L2 for sgd and adam, decoupled for adamw); not on biases")
      ->check(real_in(0.0, kMaxWeightDecay));
  add_choice(a, "--schedule", t.schedule, kScheduleNames,
             "Learning-rate schedule: constant, warmup, warmup_cosine");
  a.add_option("--warmup", t.warmup, "Warmup steps (warmup, warmup_cosine)")
      ->check(whole_in(0, kMaxSteps));
  a.add_option("--min-lr", t.min_lr, "Final learning rate of warmup_cosine (default 0; text: 1e-4, or --lr/10 below "
               "--lr 1e-3)")
      ->check(real_in(0.0, kMaxLr));
  a.add_option("--grad-clip", t.grad_clip, "Clip gradients to this global norm (0: off)")
      ->check(real_in(0.0, kMaxLr));
  a.add_option("--seed", t.seed, "Seed of initialization and data order")->check(any_uint64());
  a.add_option("--out", t.out, "Output directory (empty: runs/<model>-<data>-<date-time>)");
  a.add_option("--log-every", t.log_every, "Steps between step records (0: epochs only)")
      ->check(whole_in(0, kMaxSteps));
  add_choice(a, "--policy", t.policy, dist::kPolicyNames,
               "Data-parallel sharding policy: ddp (replicas), zero1 (shard optimizer state), "
               "zero2 (+ gradients), zero3 (+ parameters)");
  a.add_option("--sim-ranks", t.sim_ranks,
               "Simulate N ranks as threads of this process (0: off); under mpirun the ranks are "
               "the MPI processes")
      ->check(whole_in(0, kMaxSimRanks));
  a.add_option("--sim-ranks-per-node", t.sim_ranks_per_node,
               "With --sim-ranks: sum as nodes of this many consecutive ranks do under mpirun "
               "(each node's ranks, then the nodes), to replay a job that spans nodes bit for "
               "bit (0: one node)")
      ->check(whole_in(0, kMaxSimRanks));
  add_choice(a, "--batchnorm", t.batchnorm, kBatchNormNames,
               "Batch statistics under data parallelism: sync (the global batch's: N ranks train "
               "as one) or local (each rank's rows, as PyTorch DDP; one allreduce less per layer)");
  a.add_option("--bucket-mb", t.bucket_mb, "DDP gradient bucket size in MiB")
      ->check(real_in(0.001, 1e5));
  add_choice(a, "--reduce-dtype", t.reduce_dtype, kReduceDtypeNames,
               "What the gradient reductions send: fp32, or bf16 (half the bytes; rounded to "
               "bfloat16, summed in fp32 in rank order, rounded once; gradients, optimizer and "
               "checkpoints stay fp32)");
  add_choice(a, "--grad-dtype", t.grad_dtype, kGradDtypeNames,
               "What the gradients are held in: fp32, or bf16 (2 bytes each once their block's "
               "backward is done, reduced as they are; needs --reduce-dtype bf16 and --accum 1)");
  a.add_option("--zero3-persist-below", t.zero3_persist_below,
               "zero3: units of fewer parameters stay gathered on every rank, never gathered per "
               "forward and vjp (0: none; DeepSpeed's persistence threshold is 100000)")
      ->check(whole_in(0, kMaxSamples));
  a.add_flag("--no-zero3-prefetch", t.no_zero3_prefetch,
             "zero3: gather each unit when it starts, instead of while the unit before it (after "
             "it, in backward) computes; saves one unit's gather buffer");
  a.add_flag("--checkpoint-activations", t.checkpoint_activations,
             "Keep only each block's input and output through the step and recompute the block's "
             "forward in backward (gpt, vit, resnet): less activation memory for one more forward");
  a.add_flag("--fp32-activations", t.fp32_activations,
             "--precision bf16: hold every activation in fp32, also those only matrix products "
             "read (the norms' and GELU layers' outputs, bfloat16 by default): the same numbers "
             "in more memory");
  a.add_option("--watchdog-timeout", t.watchdog_timeout,
               "Seconds a collective may wait for the other ranks before the run fails")
      ->check(real_in(kMinWatchdogSeconds, kMaxWatchdogSeconds));
  a.add_flag("--report-memory", t.report_memory,
             "Print each rank's parameter, gradient and optimizer memory after the first step");
  a.add_option("--checkpoint-dir", t.checkpoint_dir,
               "Directory of rank-sharded checkpoints (empty: none); SIGTERM / SIGUSR1 then save "
               "one and exit with 75");
  a.add_option("--checkpoint-every", t.checkpoint_every,
               "Steps between checkpoints (0: only at the end)")
      ->check(whole_in(0, kMaxSteps));
  a.add_option("--keep-last", t.keep_last, "Checkpoints kept (0: all)")
      ->check(whole_in(0, kMaxRows));
  a.add_option("--init-from", t.init_from,
               "Start from these weights instead of the initializer: a .safetensors (noeira "
               "export's, or PyTorch's under --names pytorch) or a model.h5 of the same preset; "
               "every name and shape is checked");
  a.add_flag("--new-vocabulary", t.new_vocabulary,
             "text: --init-from a language model trained on another vocabulary than this run's "
             "corpus gives (fine-tuning on new text; refused without this flag)");
  a.add_option("--resume", t.resume,
               "Continue from a checkpoint: latest (of --checkpoint-dir) or a path; any number "
               "of ranks and any policy");
  a.add_flag("--overwrite-checkpoints", t.overwrite_checkpoints,
             "Start fresh in a --checkpoint-dir that holds another run's checkpoints, discarding "
             "them (refused without this flag)");
}

void add_eval_command(CLI::App& app, Command& c) {
  c.app = app.add_subcommand("eval", "Evaluate saved parameters on a data set's test split");
  CLI::App& a = *c.app;
  TrainConfig& t = c.config;
  t.model.clear();  // eval: the model the parameters file names
  a.option_defaults()->always_capture_default();
  a.add_option("--params", t.params,
               "Parameters file: <out>/model.h5 written by train, or a .safetensors (noeira "
               "export's, or PyTorch's with --model and --names pytorch)");
  a.add_option("--checkpoint", t.eval_checkpoint,
               "Or a checkpoint: a checkpoint directory (its latest), a step directory");
  a.add_option("--model", t.model, "Model preset (empty: the one the parameters file names)");
  add_common_options(c);
  a.add_option("--eval-batch", t.eval_batch, "Batch size")->check(whole_in(1, kMaxRows));
  // A text model's validation set is drawn as in training: the same windows for the same
  // batch, batches and seed (what the run's config.json holds).
  a.add_option("--batch", t.batch, "text: validation windows per batch")
      ->check(whole_in(1, kMaxRows));
  a.add_option("--eval-batches", t.eval_batches, "text: batches of validation windows")
      ->check(whole_in(1, kMaxRows));
  a.add_option("--block", t.block, "text: tokens per validation window (0: the preset's)")
      ->check(whole_in(0, kMaxRows));
  a.add_option("--seed", t.seed, "text: seed of the validation windows")->check(any_uint64());
}

void finish_config(Command& c) {
  if (!c.config_file.empty()) apply_json_config(*c.app, c.config_file, c.sibling);
  // What the user set (on the command line or in the config file), before any default fills in.
  std::set<std::string> user_set;
  for (const CLI::Option* opt : c.app->get_options()) {
    if (opt->count() > 0) user_set.insert(opt->get_name());
  }
  // A default only fills a flag left unset: given flags (and a config file's) win.
  auto default_to = [&](const std::string& flag, const std::string& value) {
    CLI::Option* opt = c.app->get_option_no_throw(flag);
    // Eval has fewer options, and its model is the one the file names.
    if (opt == nullptr || opt->count() > 0 || (flag == "--model" && c.app->get_name() == "eval")) {
      return;
    }
    // A program without the text preset keeps its own model for text.
    if (flag == "--model" && model_catalogue().find_if(value) == nullptr) return;
    opt->add_result(value);
    opt->run_callback();
  };
  // Arrays named one by one say which data set it is; so does a model's own (a program whose
  // data is always --data npy). The data set's defaults follow from it.
  if (std::ranges::any_of(array_flags(c.config),
                          [&](const auto& named) { return given(*c.app, named.first); })) {
    default_to("--data", "arrays");
  }
  // Eval's model is the one its file names: a program of one model knows it already.
  const ModelCatalogue& models = model_catalogue();
  const ModelEntry* own = models.find_if(c.config.model);
  if (own == nullptr && c.config.model.empty() && models.entries().size() == 1) {
    own = &models.entries().front();
  }
  if (own != nullptr) {
    for (const FlagValue& d : own->defaults) {
      if (d.flag == "--data") default_to(d.flag, d.value);
    }
  }
  // The data set's model next (a text run's gpt-char), so that its other defaults give way to
  // the ones the preset names (a recurrent LM's learning rate).
  const auto& data_defaults = data_set_defaults(c.config);
  for (const auto& [flag, value] : data_defaults) {
    if (flag == "--model") default_to(flag, value);
  }
  const ModelEntry* preset = models.find_if(c.config.model);
  auto preset_sets = [&](const std::string& flag) {
    if (preset == nullptr) return false;
    return std::ranges::any_of(preset->defaults,
                               [&](const FlagValue& d) { return d.flag == flag; });
  };
  for (const auto& [flag, value] : data_defaults) {
    if (flag != "--model" && !preset_sets(flag)) default_to(flag, value);
  }
  if (is_text(c.config)) {
    // nanoGPT warms up for 100 steps; a shorter run warms up for its first tenth.
    CLI::Option* warmup = c.app->get_option_no_throw("--warmup");
    if (warmup != nullptr && warmup->count() == 0) {
      warmup->add_result(std::to_string(std::min<std::int64_t>(100, c.config.steps / 10)));
      warmup->run_callback();
    }
  }
  check_task_options(*c.app, c.config);
  // After the text defaults, which name a text run's model, and after the check of what the user
  // gave (a preset's defaults are not the user's mistakes).
  if (preset != nullptr) {
    // An image preset's augmentation is for images: a user's arrays train without it.
    const bool pixels = is_text(c.config) || holds_pixels(c.config.data);
    for (const FlagValue& d : preset->defaults) {
      if (!pixels && d.flag == "--augment") continue;
      default_to(d.flag, d.value);
    }
  }
  adapt_defaults(c, user_set);
  c.config.log_format = parse_log_format(c.log_format);
  set_threads(c.config.threads);
}

}  // namespace noeira::cli
