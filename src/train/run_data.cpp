#include "train/run_data.hpp"

#include <utility>

#include "core/hash.hpp"
#include "io/text.hpp"
#include "kernels/error.hpp"
#include "train/array_dataset.hpp"
#include "train/feature_normalization.hpp"

namespace noeira {

std::filesystem::path image_dir(const TrainConfig& cfg) {
  if (!cfg.data_dir.empty()) return cfg.data_dir;
  const std::filesystem::path dir = default_data_dir(cfg.data);
  if (dir.empty()) {
    const bool h5 = cfg.data == DatasetKind::H5;
    throw InputError(detail::concat("--data ", to_string(cfg.data), " needs --data-dir, the directory of ",
                                    h5 ? "train.h5 and test.h5 (datasets /x and /y)"
                                       : "train_x.npy, train_y.npy, test_x.npy and test_y.npy"));
  }
  return dir;
}

std::filesystem::path text_corpus_path(const TrainConfig& cfg) {
  if (!cfg.text_file.empty()) return cfg.text_file;
  if (!cfg.data_dir.empty()) return cfg.data_dir;
  return io::default_text_corpus();
}

namespace {

// The regression loss of a run: the program's own, or --loss's (mse where it says auto).
TargetLossFactory regression_losses(const TrainConfig& cfg, TargetLossFactory own) {
  if (!own) return target_loss_factory(cfg.loss);
  if (cfg.loss != LossChoice::Auto) {
    throw InputError(detail::concat("--loss ", kLossNames.name_of(cfg.loss), ": model '", cfg.model,
                                    "' brings its own loss (", own()->name(), ")"));
  }
  return own;
}

// What a model of ids (its first module an embedding of `vocab` rows) cannot read: pixels, or
// features normalized as floats are.
void check_id_options(const TrainConfig& cfg, std::int64_t vocab) {
  const std::string model = detail::concat(
      "model '", cfg.model, "' takes ids (its first module is an embedding of ", vocab, " rows)");
  if (holds_pixels(cfg.data)) {
    throw InputError(detail::concat(model, ", but --data ", to_string(cfg.data),
                                    " holds images (give integer arrays: --data npy, h5 or "
                                    "arrays)"));
  }
  if (cfg.normalize != FeatureNormalize::None || cfg.feature_scale != 1.0 ||
      cfg.feature_shift != 0.0) {
    throw InputError(detail::concat(
        cfg.normalize != FeatureNormalize::None ? "--normalize" : "--feature-scale/--feature-shift",
        ": ", model, ", which are not scaled"));
  }
}

}  // namespace

ImageRun load_image_run(const TrainConfig& cfg, Target target, std::int64_t model_inputs,
                        std::int64_t model_outputs, bool train_split, TargetLossFactory own_loss,
                        std::int64_t input_vocab) {
  const DatasetKind kind = cfg.data;
  if (input_vocab > 0) check_id_options(cfg, input_vocab);
  ImageRun run;
  // What the loss asks of the targets: class labels, float targets, or either (auto).
  const bool wants_labels = cfg.loss == LossChoice::CrossEntropy;
  const bool wants_floats = !wants_labels && (cfg.loss != LossChoice::Auto || own_loss);
  if (!wants_labels) run.losses = regression_losses(cfg, std::move(own_loss));
  const bool named = kind == DatasetKind::Arrays;
  if (!named) run.dir = image_dir(cfg);
  // Uploaded once, shared by the simulated ranks; the host copies are freed at once. The
  // fingerprint covers what a batch is made of, the bytes and the statistics that normalize them.
  // The ranks of one job compare it at start-up, and checkpoints keep it, so that a resume on
  // other data is refused: a change to how it is computed makes older checkpoints of that data
  // look like another data set's.
  auto resident = [&](Split split, std::int64_t limit) {
    const bool train = split == Split::Train;
    Dataset data =
        named ? load_named_split(train ? cfg.train_x : cfg.test_x,
                                 train ? cfg.train_y : cfg.test_y, train ? "train" : "test",
                                 limit, cfg.stream_data, input_vocab)
              : load_dataset(kind, run.dir, split, limit, cfg.stream_data, input_vocab);
    // Where the split came from, for messages: its directory, or --data arrays' x.
    const std::string where = named ? (train ? cfg.train_x : cfg.test_x) : run.dir.string();
    // The loss must suit the targets.
    const bool floats = data.target_width > 0;
    if (floats ? wants_labels : wants_floats) {
      const std::string loss = cfg.loss != LossChoice::Auto
                                   ? detail::concat("--loss ", kLossNames.name_of(cfg.loss))
                                   : detail::concat("model '", cfg.model, "''s own loss");
      throw InputError(detail::concat(
          loss, " needs ", floats ? "integer class labels" : "float targets", ", but ", where,
          ": ", data.name, " has ", floats ? "float regression targets" : "integer class labels"));
    }
    // A regression's targets are the model's outputs, one for one (or as many per target as
    // the loss wants: a mean and a variance).
    const std::int64_t per_target = floats ? run.losses()->outputs_per_target() : 1;
    if (floats && data.target_width * per_target != model_outputs) {
      throw InputError(detail::concat(
          where, ": ", data.name, " has ", data.target_width, " regression target",
          data.target_width == 1 ? "" : "s", " per sample, but model '", cfg.model, "' has ",
          model_outputs, " outputs",
          per_target == 1 ? std::string()
                          : detail::concat(" (", run.losses()->name(), " takes ", per_target,
                                           " per target)")));
    }
    // The model's outputs are the classes: a label past them has no logit to score it.
    if (data.target_width == 0 && data.num_classes > model_outputs) {
      throw InputError(detail::concat(where, ": ", data.name, " has label ",
                                      data.num_classes - 1, ", but model '", cfg.model, "' has ",
                                      model_outputs, " outputs (classes 0 to ",
                                      model_outputs - 1, ")"));
    }
    if (data.target_width == 0) data.num_classes = static_cast<int>(model_outputs);
    if (data.features != model_inputs) {
      throw InputError(detail::concat("model '", cfg.model, "' takes ", model_inputs,
                                      " inputs per sample, but ", data.name, " has ",
                                      data.features, " (choose a preset for this data set)"));
    }
    // The training split decides the normalization (evaluation: the saved model's).
    if (train) {
      run.normalization = feature_normalization(data, cfg.normalize == FeatureNormalize::Standardize,
                                                cfg.feature_scale, cfg.feature_shift);
    }
    const Dataset& loaded = data;
    run.fingerprint = hash_words(std::span(loaded.pixels), run.fingerprint);
    // Float features by their own hash, held or streamed alike (array_dataset.cpp).
    if (loaded.float_features()) {
      const auto held = static_cast<std::size_t>(loaded.streamed ? 0 : loaded.values.numel());
      const std::uint64_t features =
          loaded.streamed ? loaded.streamed_hash
          : loaded.ids()  ? hash_words(std::span<const std::int32_t>(loaded.values.ids(), held))
                          : hash_words(std::span<const float>(loaded.values.data(), held));
      run.fingerprint = hash_words(std::span(&features, 1), run.fingerprint);
    }
    run.fingerprint = hash_words(std::span(loaded.mean), run.fingerprint);
    run.fingerprint = hash_words(std::span(loaded.std), run.fingerprint);
    run.fingerprint = hash_words(std::span(loaded.labels), run.fingerprint);
    run.fingerprint = hash_words(std::span(loaded.targets), run.fingerprint);
    // The features as the files hold them, then what becomes of them.
    if (!run.normalization.identity()) {
      run.fingerprint = hash_words(std::span<const float>(run.normalization.mean), run.fingerprint);
      run.fingerprint = hash_words(std::span<const float>(run.normalization.std), run.fingerprint);
      normalize_features(data, run.normalization);
    }
    return make_resident(std::move(data), target);
  };
  if (!train_split) {
    run.normalization = parse_feature_normalization(cfg.input_mean, cfg.input_std, model_inputs,
                                                    cfg.params.empty() ? cfg.eval_checkpoint
                                                                       : cfg.params);
  }
  if (train_split) run.train = resident(Split::Train, cfg.limit_train);
  run.test = resident(Split::Test, cfg.limit_test);
  if (train_split && run.train.regression() != run.test.regression()) {
    const auto kind = [](const ResidentData& d) {
      return d.regression() ? "float regression targets" : "integer class labels";
    };
    throw InputError(detail::concat(named ? cfg.train_x : run.dir.string(), ": ", run.train.name,
                                    " has ",
                                    kind(run.train), " but ", run.test.name, " has ",
                                    kind(run.test)));
  }
  return run;
}

std::string ImageRun::describe(const TrainConfig& cfg) const {
  const std::string augmented =
      cfg.augment == Augment::None ? std::string()
                                   : detail::concat(", training images ", to_string(cfg.augment),
                                                    " (padding ",
                                             cfg.crop_padding, ")");
  const std::string regression =
      test.regression() ? detail::concat(" (regression of ", test.targets.dim(1), " targets)")
                        : std::string();
  const std::string from =
      dir.empty() ? detail::concat(cfg.train_x, " and ", cfg.test_x) : dir.string();
  const char* streamed = !test.streamed              ? ""
                         : test.streamed->in_memory() ? " (features read from the program's memory)"
                                                      : " (features streamed from the files)";
  const std::string normalized =
      cfg.normalize == FeatureNormalize::Standardize
          ? ", features standardized by the training split's statistics"
          : (normalization.identity() ? std::string()
                                      : detail::concat(", features x * ", cfg.feature_scale,
                                                       " + ", cfg.feature_shift));
  return detail::concat(to_string(cfg.data), " ", train.count, " train / ", test.count, " test samples",
                        regression, " from ", from, streamed, normalized, augmented);
}

namespace {

void check_vocabulary_fits(const TrainConfig& cfg, const std::string& name,
                           const Tokenizer& tokenizer, std::int64_t model_vocab) {
  if (tokenizer.vocab_size() > model_vocab) {
    throw InputError(detail::concat(name, ": the ", to_string(tokenizer.kind()), " vocabulary has ",
                                    tokenizer.vocab_size(), " ids but model '", cfg.model,
                                    "' has ", model_vocab,
                                    tokenizer.kind() == TokenizerKind::Gpt2
                                        ? " (a gpt2-* preset takes GPT-2's ids)"
                                        : " (try --tokenizer byte)"));
  }
}

// Token shards: read a window at a time, never whole (train/text_windows.hpp).
TextRun load_token_run(const TrainConfig& cfg, Target target, std::int64_t model_vocab) {
  if (cfg.data_dir.empty()) {
    throw InputError("--data tokens reads the shards of --data-dir (noeira tokenize writes them)");
  }
  // char (TrainConfig's default, a text run's) has no vocabulary to read ids with: shards are
  // GPT-2's unless the run says byte. The command line refuses `--tokenizer char` given.
  const Tokenizer tokenizer = cfg.tokenizer == TokenizerKind::Byte ? Tokenizer::bytes()
                                                                   : Tokenizer::gpt2();
  check_vocabulary_fits(cfg, cfg.data_dir, tokenizer, model_vocab);
  const io::TokenShards shards = io::open_token_shards(cfg.data_dir);
  const std::uint64_t fingerprint =
      shards.validation->fingerprint() ^ (shards.train->fingerprint() * 1099511628211ull);
  ResidentText text{shard_tokens(shards.train, tokenizer.vocab_size(), target),
                    shard_tokens(shards.validation, tokenizer.vocab_size(), target)};
  return TextRun{cfg.data_dir, tokenizer, std::move(text), 0, fingerprint};
}

}  // namespace

TextRun load_text_run(const TrainConfig& cfg, Target target, std::int64_t model_vocab) {
  if (cfg.data == DatasetKind::Tokens) return load_token_run(cfg, target, model_vocab);
  // The corpus's bytes, then its ids straight into their tensors: a corpus of N bytes peaks at
  // about 5N (the text and the ids), never with a host copy of the ids beside the resident one.
  const io::TextCorpus corpus = io::read_text_corpus(text_corpus_path(cfg));
  const TextSplit split = split_corpus(corpus, cfg.tokenizer);
  const Tokenizer& tokenizer = split.tokenizer;
  check_vocabulary_fits(cfg, corpus.name, tokenizer, model_vocab);
  std::uint64_t fingerprint = hash_words(std::span<const std::int32_t>());
  std::int64_t unknown_train = 0;
  std::int64_t unknown_validation = 0;
  ResidentText text{encode_resident_tokens(corpus.name + "/train", tokenizer, split.train, target,
                                           fingerprint, unknown_train),
                    encode_resident_tokens(corpus.name + "/validation", tokenizer,
                                           split.validation, target, fingerprint,
                                           unknown_validation)};
  return TextRun{corpus.name, tokenizer, std::move(text), unknown_validation, fingerprint};
}

LanguageModelTask TextRun::task(const TrainConfig& cfg, std::int64_t block) const {
  if (cfg.block > block) {
    throw InputError(detail::concat("--block ", cfg.block, " exceeds model '", cfg.model,
                                    "''s block of ", block, " positions"));
  }
  if (cfg.block > 0) block = cfg.block;
  LanguageModelOptions o;
  o.steps = cfg.steps;
  o.eval_every = cfg.eval_every;
  o.eval_batches = cfg.eval_batches;
  o.batch = cfg.batch;
  o.block = block;
  o.seed = cfg.seed;
  o.eval_micro_batches = static_cast<int>(cfg.accum);
  return LanguageModelTask(text.train, text.validation, o);
}

std::string TextRun::describe(const TrainConfig& cfg) const {
  const bool sharded = text.train.shards != nullptr;
  return detail::concat(to_string(cfg.data), " ", text.train.count, " train / ",
                        text.validation.count, " validation ", to_string(tokenizer.kind()),
                        " tokens (vocabulary ", tokenizer.vocab_size(), ") from ", name,
                        sharded ? detail::concat(" (", text.train.shards->shards() +
                                                          text.validation.shards->shards(),
                                                " shards, read by window)")
                               : std::string());
}

}  // namespace noeira
