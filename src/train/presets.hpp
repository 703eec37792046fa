#pragma once
// Model presets: a name chosen at run time, a network type fixed at compile time. with_preset()
// is the one place a name becomes a type: it calls its function with std::type_identity<M> for the
// preset's model type M, so the trainer is instantiated once per preset.
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include "core/names.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"

namespace noeira {

namespace presets {
// The seed's MLP for 28x28 images: 784-256-128-10 with fused Linear+ReLU.
using Mlp = Sequential<LinearReLU<784, 256>, LinearReLU<256, 128>, Linear<128, 10>>;
// Softmax regression on 28x28 images: a one-layer baseline.
using Linear784 = Sequential<Linear<784, 10>>;
// An MLP for CIFAR-10's 3x32x32 images.
using MlpCifar = Sequential<LinearReLU<3072, 512>, LinearReLU<512, 256>, Linear<256, 10>>;
}  // namespace presets

struct PresetInfo {
  std::string_view name;
  std::string_view description;
};

inline constexpr PresetInfo kPresets[] = {
    {"mlp", "784-256-128-10 MLP, fused Linear+ReLU (Fashion-MNIST, MNIST)"},
    {"linear", "784-10 softmax regression (Fashion-MNIST, MNIST)"},
    {"mlp-cifar", "3072-512-256-10 MLP, fused Linear+ReLU (CIFAR-10)"},
};

// Calls f(std::type_identity<M>{}) for the preset's type; an unknown name is an InputError listing
// the presets.
template <class F>
decltype(auto) with_preset(std::string_view name, F&& f) {
  if (name == "mlp") return f(std::type_identity<presets::Mlp>{});
  if (name == "linear") return f(std::type_identity<presets::Linear784>{});
  if (name == "mlp-cifar") return f(std::type_identity<presets::MlpCifar>{});
  std::string known;
  for (const PresetInfo& p : kPresets) known += (known.empty() ? "" : ", ") + std::string(p.name);
  throw_unknown_name("model", name, known);
}

}  // namespace noeira
