#pragma once
// Model presets: a name chosen at run time, a network type fixed at compile time. The preset
// catalogue (train/preset_entries_*.cpp) is the one place a name becomes a type: an entry per
// preset, compiled for its type (train/model_entry.hpp), as a user's own model is.
#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include "core/init.hpp"
#include "core/names.hpp"
#include "nn/activation.hpp"
#include "nn/batchnorm.hpp"
#include "nn/conv2d.hpp"
#include "nn/gpt.hpp"
#include "nn/recurrent_lm.hpp"
#include "nn/linear.hpp"
#include "nn/pool2d.hpp"
#include "nn/resnet.hpp"
#include "nn/sequential.hpp"
#include "nn/vit.hpp"

namespace noeira {

namespace presets {
// The seed's MLP for 28x28 images: 784-256-128-10 with fused Linear+ReLU.
using Mlp = Sequential<LinearReLU<784, 256>, LinearReLU<256, 128>, Linear<128, 10>>;
// Softmax regression on 28x28 images: a one-layer baseline.
using Linear784 = Sequential<Linear<784, 10>>;
// An MLP for CIFAR-10's 3x32x32 images.
using MlpCifar = Sequential<LinearReLU<3072, 512>, LinearReLU<512, 256>, Linear<256, 10>>;

// A small conv net for 28x28 images: two stages of 3x3 convolution (no bias: BatchNorm follows),
// BatchNorm, ReLU and 2x2 max pooling, then a 3136-128-10 MLP.
template <ImageShape In, std::int64_t Channels>
using CnnStage = Sequential<Conv2D<ConvSpec{In, Channels, 3, 1, 1, 1, 1, false}>,
                            BatchNorm2D<ImageShape{Channels, In.height, In.width}>,
                            ReLU<Channels * In.height * In.width>,
                            MaxPool2D<PoolSpec{ImageShape{Channels, In.height, In.width}, 2, 2}>>;
using Cnn = Sequential<CnnStage<ImageShape{1, 28, 28}, 32>, CnnStage<ImageShape{32, 14, 14}, 64>,
                       LinearReLU<64 * 7 * 7, 128>, Linear<128, 10>>;
// He et al.'s CIFAR ResNet-20 (nn/resnet.hpp), for 28x28 images and for CIFAR-10.
using ResNet20 = ResNetCifar<ImageShape{1, 28, 28}, 3, 10>;
using ResNet20Cifar = ResNetCifar<ImageShape{3, 32, 32}, 3, 10>;
// torchvision's resnet18 with the small-image stem, for CIFAR-10.
using ResNet18Cifar = ResNet18<ImageShape{3, 32, 32}, 10, ResNetStem::Small>;

// GPTs (nn/gpt.hpp): {vocab, block, layers, heads, width}. The character and byte presets have
// 256 ids, room for the byte tokenizer and for a character vocabulary of up to 256 (ids the
// tokenizer never produces only ever receive the softmax's gradient); gpt2-124m is GPT-2's.
using GptTiny = Gpt<GptShape{256, 16, 2, 2, 32}>;     // for tests
using GptChar = Gpt<GptShape{256, 64, 4, 4, 128}>;    // nanoGPT's CPU shape
using GptSmall = Gpt<GptShape{256, 256, 6, 6, 384}>;  // nanoGPT's shakespeare-char shape
using Gpt2 = Gpt<GptShape{50257, 1024, 12, 12, 768}>;
using Gpt2Tiny = Gpt<GptShape{50257, 64, 2, 2, 32}>;  // GPT-2's ids (--data tokens), for tests

// Recurrent language models (nn/recurrent_lm.hpp): {vocab, window, embedding, hidden}, two layers.
using LstmTiny = RecurrentLm<RecurrentCell::Lstm, RecurrentLmShape{256, 16, 16, 32}>;  // tests
using LstmChar = RecurrentLm<RecurrentCell::Lstm, RecurrentLmShape{256, 64, 64, 256}>;
using GruChar = RecurrentLm<RecurrentCell::Gru, RecurrentLmShape{256, 64, 64, 256}>;

// ViTs (nn/vit.hpp): {image, patch, layers, heads, width, classes}. vit-tiny reads 28x28
// Fashion-MNIST as 16 patches of 7x7 (17 tokens with the class token).
using VitTiny = Vit<VitShape{ImageShape{1, 28, 28}, 7, 4, 4, 64, 10}>;
}  // namespace presets

// Whether a model reads token ids and predicts the next token (a GPT, a recurrent LM), rather
// than classifying.
template <class M>
concept LanguageModel = requires {
  { M::vocab } -> std::convertible_to<std::int64_t>;
  { M::block } -> std::convertible_to<std::int64_t>;
};

// A model that names its initializer (a ViT's N(0, 0.02)) rather than taking the preset family's.
template <class M>
concept NamesItsInitializer = requires {
  { M::initializer } -> std::convertible_to<InitKind>;
};

// A value a preset gives a flag that the command line and the config file leave unset
// (cli/options.cpp applies them): for a model that trains best with settings other than the
// images' defaults (Adam at 1e-3, no weight decay, 5 epochs).
struct FlagDefault {
  std::string_view flag;
  std::string_view value;
};

// vit-tiny: AdamW with cosine decay (the images' schedule), weight decay on the matrices,
// clipping, batch 64 (88.5% after 12 epochs, against 87.9% after 10 at batch 100 and lr 2e-3);
// no warmup, which a fixed step count would make fail on short runs (the cosine schedule refuses
// a warmup as long as the run) and which clipping makes unnecessary here. README.md has the
// figures.
inline constexpr FlagDefault kVitTinyDefaults[] = {
    {"--optimizer", "adamw"}, {"--lr", "1e-3"},   {"--weight-decay", "0.05"},
    {"--grad-clip", "1"},     {"--batch", "64"},  {"--epochs", "12"},
};

// resnet20 on Fashion-MNIST: AdamW with weight decay 0.05, random crops (padding 2) and flips, 15
// epochs: 93.16% test accuracy, against 93.08% with Adam and no decay, 92.32% after 8 epochs and
// 92.24% after 5 without augmentation (README.md has the figures).
inline constexpr FlagDefault kResnet20Defaults[] = {
    {"--optimizer", "adamw"}, {"--weight-decay", "0.05"}, {"--augment", "crop-flip"},
    {"--epochs", "15"},
};

// The recurrent LMs: the text defaults but lr 3e-3 (lstm-char on fortunes after 2000 steps:
// validation loss 2.36 against 2.66 at the text default of 1e-3; README.md has the figures).
inline constexpr FlagDefault kRecurrentLmDefaults[] = {{"--lr", "3e-3"}};

struct PresetInfo {
  std::string_view name;
  std::string_view description;
  std::span<const FlagDefault> defaults = {};
};

inline constexpr PresetInfo kPresets[] = {
    {"mlp", "784-256-128-10 MLP, fused Linear+ReLU (Fashion-MNIST, MNIST)"},
    {"linear", "784-10 softmax regression (Fashion-MNIST, MNIST)"},
    {"mlp-cifar", "3072-512-256-10 MLP, fused Linear+ReLU (CIFAR-10)"},
    {"cnn", "2 x (conv 3x3, BatchNorm, ReLU, max-pool 2), 3136-128-10 MLP (Fashion-MNIST)"},
    {"resnet20",
     "CIFAR-style ResNet-20, 16-32-64 channels, for 28x28 images (Fashion-MNIST; defaults: adamw "
     "weight decay 0.05, crop-flip, 15 epochs)",
     kResnet20Defaults},
    {"resnet20-cifar", "CIFAR-style ResNet-20, 16-32-64 channels (CIFAR-10)"},
    {"resnet18", "torchvision's resnet18 with a 3x3 stem, 11.2 M parameters (CIFAR-10)"},
    {"vit-tiny",
     "ViT, 7x7 patches of 28x28 images, 4 layers x 4 heads, width 64 (Fashion-MNIST; defaults: "
     "adamw lr 1e-3, weight decay 0.05, clipping 1, batch 64, 12 epochs)",
     kVitTinyDefaults},
    {"gpt-tiny", "GPT, 2 layers x 2 heads, width 32, block 16, 256 ids (tests; --data text)"},
    {"gpt-char", "GPT, 4 layers x 4 heads, width 128, block 64, 256 ids (--data text)"},
    {"gpt-small", "GPT, 6 layers x 6 heads, width 384, block 256, 256 ids (--data text)"},
    {"gpt2-124m",
     "GPT-2: 12 layers x 12 heads, width 768, block 1024, 50257 ids (--data tokens or text)"},
    {"gpt2-tiny",
     "GPT, 2 layers x 2 heads, width 32, block 64, GPT-2's 50257 ids (tests; --data tokens)"},
    {"lstm-tiny", "2-layer LSTM, embedding 16, hidden 32, window 16, 256 ids (tests; --data text)",
     kRecurrentLmDefaults},
    {"lstm-char",
     "2-layer LSTM, embedding 64, hidden 256, window 64, 256 ids (--data text; default lr 3e-3)",
     kRecurrentLmDefaults},
    {"gru-char",
     "2-layer GRU, embedding 64, hidden 256, window 64, 256 ids (--data text; default lr 3e-3)",
     kRecurrentLmDefaults},
};

// The preset called `name`, or null.
constexpr const PresetInfo* find_preset(std::string_view name) {
  for (const PresetInfo& p : kPresets) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace noeira
