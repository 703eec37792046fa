#pragma once
// The data of a `noeira train` run, resident on the run's target and shared by its simulated
// ranks, and what it implies: the task each rank trains on, the run header's line, and the model's
// initializer. Images (--data fashion-mnist, mnist, cifar10) and a user's arrays (--data npy) are
// classified by the MLP, CNN, ResNet and ViT presets;
// text (--data text) is modelled by the GPT presets. A preset given the other kind of data is a
// one-line error before anything is loaded.
#include <cstdint>
#include <filesystem>
#include <string>

#include "core/init.hpp"
#include "train/batch.hpp"
#include "train/supervised.hpp"
#include "train/config.hpp"
#include "train/feature_normalization.hpp"
#include "train/language_model.hpp"
#include "train/presets.hpp"
#include "train/text_data.hpp"
#include "train/text_windows.hpp"

namespace noeira {

struct ImageRun {
  std::filesystem::path dir;
  ResidentData train, test;
  std::uint64_t fingerprint = 0;  // hash_words of every split loaded: the ranks of a job compare it
  // What the features became (a user's arrays): the training split's decision, or the saved
  // model's in evaluation.
  FeatureNormalization normalization;
  // A regression's loss: the model's own, or --loss's.
  TargetLossFactory losses;

  SupervisedTask task(const TrainConfig& cfg) const {
    return SupervisedTask(train, test, cfg.epochs, cfg.batch, cfg.eval_batch, cfg.seed,
                          Augmentation{cfg.augment, cfg.crop_padding}, losses);
  }
  std::string describe(const TrainConfig& cfg) const;
};

struct TextRun {
  std::string name;     // the corpus's path
  Tokenizer tokenizer;  // stored with the parameters and checkpoints (cfg.vocabulary)
  ResidentText text;
  std::int64_t unknown_validation = 0;
  std::uint64_t fingerprint = 0;  // hash_words of the tokens: the ranks of a job compare it

  // Windows of cfg.block tokens, or of the model's whole block when it is 0.
  LanguageModelTask task(const TrainConfig& cfg, std::int64_t block) const;
  std::string describe(const TrainConfig& cfg) const;
};

// Where a run's corpus is: --text-file, else --data-dir, else the fortunes package.
std::filesystem::path text_corpus_path(const TrainConfig& cfg);
// The image data set's directory: --data-dir, else the data set's default.
std::filesystem::path image_dir(const TrainConfig& cfg);

// The training and test splits; `train_split` false: the test split only (evaluation). The
// samples must have model_inputs features and labels below model_outputs, the classes, or as many
// float targets as the loss wants outputs for: a program's own loss `own_loss` (--loss must then
// be auto), else the one --loss names. --loss must suit the targets. input_vocab > 0: the model
// takes ids (core/module.hpp input_vocab_of), which the features must be.
ImageRun load_image_run(const TrainConfig& cfg, Target target, std::int64_t model_inputs,
                        std::int64_t model_outputs, bool train_split = true,
                        TargetLossFactory own_loss = {}, std::int64_t input_vocab = 0);
// The vocabulary must fit the model's (the preset's vocab ids).
TextRun load_text_run(const TrainConfig& cfg, Target target, std::int64_t model_vocab);

// The initializer of a preset: Kaiming normal for the MLPs (ReLU layers), N(0, 0.02) for the
// GPTs (GPT-2's, residual projections scaled in nn/gpt.hpp; biases and norms are constants
// whatever the spec), the model's own where it
// names one (the ViT's).
template <class M>
Init model_init(const TrainConfig& cfg, Target target) {
  InitSpec spec;
  spec.kind = LanguageModel<M> ? InitKind::Normal : InitKind::KaimingNormal;
  if constexpr (NamesItsInitializer<M>) spec.kind = M::initializer;
  spec.std = 0.02f;
  spec.seed = cfg.seed;
  return Init(target, spec);
}

// The preset must suit the data: the language models read text, the others images.
template <class M>
void check_preset_suits_data(const TrainConfig& cfg) {
  if (LanguageModel<M> != is_text(cfg)) {
    throw InputError(detail::concat(
        "model '", cfg.model, "' ", LanguageModel<M> ? "models text" : "classifies images",
        " but --data is ", to_string(cfg.data),
        LanguageModel<M> ? " (use --data text)" : " (use a gpt, lstm or gru preset for --data text)"));
  }
}

}  // namespace noeira
