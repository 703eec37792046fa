#pragma once
// Everything a training or evaluation run is told, as plain values — numbers, and enums where the
// command line names a choice (it parses each name once; nothing below it compares a name): the
// command line and a JSON config file fill it; the trainer turns it into an optimizer, a schedule and a data set. Saved as
// <out>/config.json so a run can be repeated with `noeira train --config <out>/config.json`.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/finite.hpp"
#include "core/names.hpp"
#include "distributed/residency.hpp"
#include "loss/target_loss.hpp"
#include "kernels/target.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "train/augment.hpp"
#include "train/dataset.hpp"
#include "train/name_map.hpp"
#include "train/tokenizer.hpp"

namespace noeira {

enum class LogFormat : std::uint8_t { Human, Json };
inline constexpr NameTable<LogFormat, 2> kLogFormatNames{
    {{{LogFormat::Human, "human"}, {LogFormat::Json, "json"}}}, "log format"};
inline constexpr NameTable<Target, 2> kDeviceNames{
    {{{Target::Cpu, "cpu"}, {Target::Cuda, "cuda"}}}, "--device"};
inline constexpr NameTable<Precision, 2> kPrecisionNames{
    {{{Precision::Fp32, "fp32"}, {Precision::Bf16, "bf16"}}}, "--precision"};
// The wire type of the gradient reductions (distributed/grad_reducer.hpp).
inline constexpr NameTable<DType, 2> kReduceDtypeNames{
    {{{DType::F32, "fp32"}, {DType::BF16, "bf16"}}}, "--reduce-dtype"};
// What the gradients are held in once final (distributed/param_store.hpp).
inline constexpr NameTable<DType, 2> kGradDtypeNames{
    {{{DType::F32, "fp32"}, {DType::BF16, "bf16"}}}, "--grad-dtype"};
std::string_view to_string(LogFormat format);
LogFormat parse_log_format(std::string_view name);
// Batch normalization under data parallelism: the global batch's statistics, or each rank's.
enum class BatchNormStats : std::uint8_t { Sync, Local };
inline constexpr NameTable<BatchNormStats, 2> kBatchNormNames{
    {{{BatchNormStats::Sync, "sync"}, {BatchNormStats::Local, "local"}}}, "--batchnorm"};
// How a user's features are normalized (train/feature_normalization.hpp).
enum class FeatureNormalize : std::uint8_t { None, Standardize };
inline constexpr NameTable<FeatureNormalize, 2> kNormalizeNames{
    {{{FeatureNormalize::None, "none"}, {FeatureNormalize::Standardize, "standardize"}}},
    "--normalize"};

struct TrainConfig {
  std::string model = "mlp";             // a preset name (train/presets.hpp)
  DatasetKind data = DatasetKind::FashionMnist;
  std::string data_dir;                  // empty: the data set's default directory
  // --data arrays: the arrays themselves, each a file.npy, a file.h5:/dataset or shards of them
  // joined by commas (io/array_spec.hpp): features x and labels or targets y of each split.
  std::string train_x, train_y, test_x, test_y;
  // A user's float features read batch by batch from their files instead of held in memory (data
  // larger than memory); they are anyway when holding them would take over a quarter of it.
  bool stream_data = false;
  // How a user's features become the model's inputs (train/feature_normalization.hpp): none, or
  // standardize (each feature by the training split's mean and standard deviation); or, instead,
  // x · feature_scale + feature_shift (a uint8 image's 1/255 and 0).
  FeatureNormalize normalize = FeatureNormalize::None;
  double feature_scale = 1.0;
  double feature_shift = 0.0;
  // Text (--data text): a corpus file (or data_dir, a directory of text files; neither: the
  // fortunes package), its tokenizer, and a run of `steps` steps evaluated every `eval_every`
  // on `eval_batches` batches of validation windows. Epochs do not apply.
  std::string text_file;
  TokenizerKind tokenizer = TokenizerKind::Char;
  std::int64_t steps = 2000;
  std::int64_t eval_every = 250;
  std::int64_t eval_batches = 20;
  std::int64_t block = 0;                // tokens per window; 0: the preset's block
  std::int64_t limit_train = 0;          // > 0: use only the first N training samples
  std::int64_t limit_test = 0;           // > 0: evaluate on the first N test samples only
  std::int64_t epochs = 5;
  // > 0: this run trains that many periods (epochs, or text's evaluation periods) from where it
  // starts, a resumed period's rest counting as one, and ends as at its last (Trainer::fit,
  // train/fit.hpp). Past `epochs` (`steps`) it extends the schedule's span to its end. Not an
  // option of the command line, nor of config.json: a program's own.
  std::int64_t periods_this_run = 0;
  std::int64_t batch = 100;              // global batch (all ranks together)
  std::int64_t eval_batch = 1000;
  // Augmentation of the training images (train/augment.hpp): none | crop-flip, the crop padded by
  // crop_padding pixels on every side. CIFAR-10 runs default to crop-flip with 4 (the command
  // line's data-set defaults, cli/options.cpp), the 28x28 data sets to none.
  Augment augment = Augment::None;
  std::int64_t crop_padding = 2;
  // The loss: auto (softmax cross-entropy for class labels, the mean squared error for float
  // targets), cross-entropy, mse, or gaussian-nll (the model gives a mean and a variance per
  // target: loss/target_loss.hpp).
  LossChoice loss = LossChoice::Auto;
  OptimizerKind optimizer = OptimizerKind::Adam;
  double lr = 1e-3;
  double momentum = 0.0;                 // SGD only
  double beta1 = 0.9, beta2 = 0.999;     // Adam, AdamW
  double weight_decay = 0.0;
  // Cosine decay to min_lr over the run by default: with Adam at 1e-3 it adds about 1 point of
  // Fashion-MNIST test accuracy after 5 epochs over a constant rate (88.8% vs 87.7%, 3 seeds).
  ScheduleKind schedule = ScheduleKind::WarmupCosine;
  std::int64_t warmup = 0;               // warmup steps
  double min_lr = 0.0;                   // floor of the cosine schedule
  double grad_clip = 0.0;                // max global gradient norm; 0 = off
  // Gradient accumulation: micro-batches per optimizer step, each batch/accum rows of the global
  // batch (train/step.hpp); the batch, the data order and the schedule's steps stay as they are.
  std::int64_t accum = 1;
  std::uint64_t seed = 1;                // initialization and data order
  int threads = 0;                       // OpenMP and OpenBLAS threads; 0 = all cores
  Target device = Target::Cpu;           // where tensors live and kernels run
  bool allow_tf32 = false;               // cuda: TF32 tensor cores for matrix products
  // fp32 | bf16: the matrix products' operands (kernels/target.hpp Precision); parameters,
  // gradients, optimizer state and checkpoints stay fp32 either way.
  Precision precision = Precision::Fp32;
  std::string out;                       // output directory; empty: runs/<model>-<data>-<time>
  LogFormat log_format = LogFormat::Human;
  std::int64_t log_every = 100;          // steps between step records (0 = only epochs)
  std::string params;                    // eval: the parameters file to evaluate
  std::string eval_checkpoint;           // eval: or a checkpoint (its parameter values)
  // train: start from these weights (a .safetensors or a model.h5) instead of the initializer.
  std::string init_from;
  // Reading a .safetensors: the name map its tensors follow (train/name_map.hpp): noeira,
  // pytorch, or empty for the one the file's metadata names (else what its names show).
  std::optional<NameScheme> names;
  // Distributed training (issue 4). Under an MPI launcher the ranks are the MPI processes;
  // otherwise sim_ranks threads of this process (0 = one rank, no simulation).
  dist::Policy policy = dist::Policy::Ddp;
  int sim_ranks = 0;
  // With sim_ranks: the simulated ranks sum as nodes of this many consecutive ranks would
  // (distributed/node_layout.hpp: what `mpirun` on such nodes adds up); 0 = one node.
  int sim_ranks_per_node = 0;
  double bucket_mb = 25.0;               // DDP gradient bucket size
  // fp32 | bf16: what the gradient reductions send (bf16: rounded, summed in fp32, rounded once;
  // every policy's gradients then hold the same bits). Gradients stay fp32 everywhere else.
  DType reduce_dtype = DType::F32;
  // fp32 | bf16: what the gradients are held in once their unit's vjp is done (bf16: 2 bytes
  // each, reduced as they are; needs bf16 reductions and one micro-batch per step).
  DType grad_dtype = DType::F32;
  std::int64_t zero3_persist_below = 0;  // ZeRO-3: smaller units stay gathered (PolicyOptions)
  bool no_zero3_prefetch = false;        // ZeRO-3: each gather when its unit starts
  bool checkpoint_activations = false;   // blocks recompute their forward in vjp
  bool fp32_activations = false;         // --precision bf16: hold no activation as bfloat16
  // Batch normalization under data parallelism: sync (statistics of the global batch, so N ranks
  // train the model one rank trains) or local (each rank's rows, as PyTorch's DDP; faster).
  BatchNormStats batchnorm = BatchNormStats::Sync;
  double watchdog_timeout = 300.0;       // seconds a collective may wait before the run fails
  bool report_memory = false;            // print each rank's memory after the first step
  // Checkpoints (issue 5): rank-sharded, every checkpoint_every steps (0: only at the end) and
  // when a stop signal arrives; empty dir: none.
  std::string checkpoint_dir;
  std::int64_t checkpoint_every = 0;
  int keep_last = 3;
  std::string resume;                    // "latest" (of checkpoint_dir) or a checkpoint path
  // A fresh run refuses a checkpoint_dir that holds checkpoints (another run's) unless told to
  // discard them; never saved in config.json, so that repeating a run never discards by itself.
  bool overwrite_checkpoints = false;
  // Save and load parameters holding NaN or infinity (to look at a diverged model).
  bool allow_non_finite = false;
  // Text: the run's tokenizer (Tokenizer::to_text), set when the corpus is loaded, not by a flag;
  // stored with the parameters and checkpoints so that generation needs no corpus.
  std::string vocabulary;
  // A user's arrays: the normalization the run applies, as the float lists model.h5 records
  // (input_mean, input_std; both empty: none), set when the data is loaded, not by a flag; eval
  // takes them from the saved model.
  std::string input_mean, input_std;
  // --init-from a language model of another vocabulary than this run's corpus gives: meant
  // (fine-tuning on new text, the embedding rows taking new tokens' meanings), else refused.
  bool new_vocabulary = false;
  // The hash of the data the run trains on (the ranks compare it at start-up), set when the data
  // is loaded, not by a flag; stored in checkpoints, so that a resume on other data is refused.
  std::uint64_t data_fingerprint = 0;
};

// The JSON form of a configuration, with the command line's option names as keys.
nlohmann::json to_json(const TrainConfig& config);

// The optimizer and schedule the configuration names (InputError for unknown names or values).
OptimizerConfig optimizer_config(const TrainConfig& config);
// The schedule's options against a run of `total_steps` steps, in the flags' words: a warmup
// that warmup_cosine leaves no steps to decay in, a --min-lr above --lr.
void check_schedule(const TrainConfig& config, std::int64_t total_steps);
LrSchedule lr_schedule(const TrainConfig& config, std::int64_t total_steps);

// The target --device names: "cpu" or "cuda"; anything else is an InputError.
Target parse_device(std::string_view name);
Precision parse_precision(std::string_view name);
// What the units compute with at a precision: fp32 parameters, or at bf16 a bf16 copy of them
// beside fp32 masters (dist::PolicyOptions::param_dtype).
inline DType param_dtype_of(Precision precision) {
  return precision == Precision::Bf16 ? DType::BF16 : DType::F32;
}
DType parse_reduce_dtype(std::string_view name);
DType parse_grad_dtype(std::string_view name);

// Whether the run trains a language model on text (--data text) rather than classifying images.
inline bool is_text(const TrainConfig& config) { return is_language_data(config.data); }

inline NonFinite non_finite_policy(const TrainConfig& config) {
  return config.allow_non_finite ? NonFinite::Allow : NonFinite::Refuse;
}

// Checks the values that are not checked where they are used; InputError naming the option.
void validate(const TrainConfig& config);

}  // namespace noeira
