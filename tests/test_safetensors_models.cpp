// Models in safetensors files (train/weights_file.hpp) under the name maps (train/name_map.hpp):
// the maps give PyTorch's names, a round trip noeira -> safetensors -> noeira is bit-identical
// under either map (GPT-2's transposed matrices and torchvision's I64 counters included), and a
// file that does not fit the model is an error naming the tensor.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "distributed/units.hpp"
#include "expect_error.hpp"
#include "gradcheck.hpp"
#include "io_test_files.hpp"
#include "train/presets.hpp"
#include "train/weights_file.hpp"

namespace noeira {
namespace {

using testing::expect_input_error;

TEST(NameMap, MlpIsTorchSequentialWithReluModulesBetween) {
  const NameMap m = NameMap::for_preset(NameScheme::Pytorch, "mlp");
  EXPECT_EQ(m.map("0.weight").name, "0.weight");
  EXPECT_EQ(m.map("1.bias").name, "2.bias");
  EXPECT_EQ(m.map("2.weight").name, "4.weight");
  EXPECT_FALSE(m.map("2.weight").transposed);
  EXPECT_EQ(NameMap::for_preset(NameScheme::Noeira, "mlp").map("2.weight").name, "2.weight");
}

TEST(NameMap, GptIsHuggingFaceGpt2) {
  const NameMap m = NameMap::for_preset(NameScheme::Pytorch, "gpt-tiny");
  EXPECT_EQ(m.map("lm_head.weight").name, "transformer.wte.weight");
  EXPECT_EQ(m.map("wpe.weight").name, "transformer.wpe.weight");
  EXPECT_EQ(m.map("ln_f.bias").name, "transformer.ln_f.bias");
  EXPECT_EQ(m.map("h.1.ln_2.weight").name, "transformer.h.1.ln_2.weight");
  const ForeignName qkv = m.map("h.1.attn.qkv.weight");
  EXPECT_EQ(qkv.name, "transformer.h.1.attn.c_attn.weight");
  EXPECT_TRUE(qkv.transposed);
  EXPECT_FALSE(m.map("h.1.attn.qkv.bias").transposed);
  EXPECT_EQ(m.map("h.0.attn.proj.weight").name, "transformer.h.0.attn.c_proj.weight");
  EXPECT_EQ(m.map("h.0.mlp.0.bias").name, "transformer.h.0.mlp.c_fc.bias");
  EXPECT_EQ(m.map("h.0.mlp.1.weight").name, "transformer.h.0.mlp.c_proj.weight");
  EXPECT_TRUE(m.ignorable("transformer.h.3.attn.bias"));
  EXPECT_TRUE(m.ignorable("transformer.h.0.attn.masked_bias"));
  EXPECT_TRUE(m.ignorable("lm_head.weight"));
  EXPECT_FALSE(m.ignorable("transformer.h.0.attn.c_attn.bias"));
}

TEST(NameMap, ResNetIsTorchvisionWithIntegerCounters) {
  const NameMap m = NameMap::for_preset(NameScheme::Pytorch, "resnet18");
  EXPECT_EQ(m.map("layer1.0.bn1.running_mean").name, "layer1.0.bn1.running_mean");
  EXPECT_FALSE(m.map("layer1.0.bn1.running_mean").counter);
  EXPECT_TRUE(m.map("layer2.0.downsample.1.num_batches_tracked").counter);
}

TEST(NameMap, PresetsWithoutAMapAreRefused) {
  expect_input_error([] { (void)NameMap::for_preset(NameScheme::Pytorch, "cnn"); },
                     {"model 'cnn'", "no PyTorch name map", "--names noeira"});
  expect_input_error([] { (void)kNameSchemeNames.parse("keras"); },
                     {"'keras'", "noeira, pytorch"});
  // A program's own model named like a preset family has no map: it is not the preset's type.
  for (const char* own : {"gpt-mine", "lstm-big", "mlp2"}) {
    expect_input_error([&] { (void)NameMap::for_preset(NameScheme::Pytorch, own); },
                       {detail::concat("model '", own, "'"), "no PyTorch name map"});
  }
}

// Every parameter's and buffer's bits, in walk order.
template <class M>
std::vector<std::uint32_t> walk_bits(M& model) {
  std::vector<std::uint32_t> out;
  const dist::WalkUnits walk = dist::walk_units(model);
  auto add = [&](const Tensor& t) {
    for (const float v : t.to_vector()) out.push_back(std::bit_cast<std::uint32_t>(v));
  };
  for (const NamedParam& p : walk.params) add(p.param->val);
  for (const NamedBuffer& b : walk.buffers) add(*b.tensor);
  return out;
}

Init seeded(std::uint64_t seed) {
  return Init(Target::Cpu, InitSpec{InitKind::Normal, 0.0f, 0.5f, seed});
}

// Writes model `M` (weights from seed 1, buffers moved off their initial values) under `scheme`,
// reads it into another (seed 2) and expects every bit back.
template <class M>
void expect_round_trip(std::string_view preset, NameScheme scheme) {
  testing::TempDir dir;
  const std::filesystem::path file = dir / "m.safetensors";
  M a(seeded(1));
  std::uint32_t seed = 7;
  for_each_buffer(a, [&](const std::string&, Tensor& b) {
    std::vector<float> v = testing::random_values(static_cast<std::size_t>(b.numel()), seed++,
                                                  0.5f, 1.5f);
    for (float& x : v) x = std::round(x * 8.0f);  // whole numbers: num_batches_tracked is one
    b.copy_from(v);
  });
  const NameMap names = NameMap::for_preset(scheme, preset);
  save_weights_safetensors(file, preset, names, dist::walk_units(a), {{"vocabulary", "ab"}},
                           NonFinite::Refuse);
  M b(seeded(2));
  ASSERT_NE(walk_bits(a), walk_bits(b));  // not vacuous
  const io::SafetensorsFile st = io::SafetensorsFile::open(file);
  EXPECT_EQ(st.metadata().at("model"), preset);
  EXPECT_EQ(st.metadata().at("names"), kNameSchemeNames.name_of(scheme));
  EXPECT_EQ(st.metadata().at("vocabulary"), "ab");
  const dist::WalkUnits walk = dist::walk_units(b);
  load_weights_safetensors(st, preset, reading_name_map(st, std::nullopt, preset, walk), walk,
                           NonFinite::Refuse);
  EXPECT_EQ(walk_bits(a), walk_bits(b));
}

TEST(SafetensorsModel, RoundTripIsBitIdentical) {
  expect_round_trip<presets::Mlp>("mlp", NameScheme::Noeira);
  expect_round_trip<presets::Mlp>("mlp", NameScheme::Pytorch);
  expect_round_trip<presets::GptTiny>("gpt-tiny", NameScheme::Noeira);
  expect_round_trip<presets::GptTiny>("gpt-tiny", NameScheme::Pytorch);
  expect_round_trip<presets::ResNet20>("resnet20", NameScheme::Noeira);
  expect_round_trip<presets::ResNet20>("resnet20", NameScheme::Pytorch);
}

TEST(SafetensorsModel, GptMatricesAreStoredTransposedAndTheHeadOnce) {
  testing::TempDir dir;
  const std::filesystem::path file = dir / "g.safetensors";
  presets::GptTiny m(seeded(3));
  save_weights_safetensors(file, "gpt-tiny", NameMap::for_preset(NameScheme::Pytorch, "gpt-tiny"),
                           dist::walk_units(m), {}, NonFinite::Refuse);
  const io::SafetensorsFile st = io::SafetensorsFile::open(file);
  EXPECT_EQ(st.find("transformer.h.0.attn.c_attn.weight")->shape, (Shape{32, 96}));
  EXPECT_EQ(st.find("transformer.h.0.mlp.c_proj.weight")->shape, (Shape{128, 32}));
  EXPECT_EQ(st.find("transformer.wte.weight")->shape, (Shape{256, 32}));
  EXPECT_EQ(st.find("lm_head.weight"), nullptr);
}

TEST(SafetensorsModel, AFileThatDoesNotFitIsNamed) {
  testing::TempDir dir;
  presets::Mlp mlp(seeded(1));
  const dist::WalkUnits walk = dist::walk_units(mlp);
  const NameMap torch = NameMap::for_preset(NameScheme::Pytorch, "mlp");
  const std::filesystem::path file = dir / "mlp.safetensors";
  save_weights_safetensors(file, "mlp", torch, walk, {}, NonFinite::Refuse);
  const io::SafetensorsFile st = io::SafetensorsFile::open(file);

  // The file says mlp: a linear model refuses it.
  presets::Linear784 linear(seeded(1));
  expect_input_error(
      [&] { load_weights_safetensors(st, "linear", torch, dist::walk_units(linear),
                                     NonFinite::Refuse); },
      {file.string(), "model 'mlp'", "not 'linear'"});
  // Read under noeira's names, the PyTorch names are missing.
  expect_input_error(
      [&] { load_weights_safetensors(st, "mlp", NameMap::for_preset(NameScheme::Noeira, "mlp"),
                                     walk, NonFinite::Refuse); },
      {file.string(), "tensor '1.weight' is missing", "--names noeira"});

  // A file without metadata (as PyTorch writes them): a missing, a misshapen and an extra tensor.
  const std::vector<float> w0(256 * 784, 0.0f), b0(256, 0.0f), w2(128 * 256, 0.0f),
      b2(128, 0.0f), w4(10 * 128, 0.0f), b4(10, 0.0f), wrong(5, 0.0f);
  const std::filesystem::path bare = dir / "bare.safetensors";
  io::save_safetensors(bare, {{"0.weight", {256, 784}, w0}, {"0.bias", {256}, b0},
                              {"2.weight", {128, 256}, w2}, {"2.bias", {128}, b2},
                              {"4.weight", {10, 128}, w4}});
  expect_input_error([&] { load_weights_file(bare, "mlp", std::nullopt, walk, NonFinite::Refuse); },
                     {bare.string(), "tensor '4.bias' (noeira's '2.bias') is missing"});
  io::save_safetensors(bare, {{"0.weight", {256, 784}, w0}, {"0.bias", {256}, b0},
                              {"2.weight", {128, 256}, w2}, {"2.bias", {128}, b2},
                              {"4.weight", {10, 128}, w4}, {"4.bias", {5}, wrong}});
  expect_input_error([&] { load_weights_file(bare, "mlp", NameScheme::Pytorch, walk, NonFinite::Refuse); },
                     {bare.string(), "tensor '4.bias'", "shape [5]", "expects [10]"});
  io::save_safetensors(bare, {{"0.weight", {256, 784}, w0}, {"0.bias", {256}, b0},
                              {"2.weight", {128, 256}, w2}, {"2.bias", {128}, b2},
                              {"4.weight", {10, 128}, w4}, {"4.bias", {10}, b4},
                              {"6.weight", {5}, wrong}});
  expect_input_error([&] { load_weights_file(bare, "mlp", NameScheme::Pytorch, walk, NonFinite::Refuse); },
                     {bare.string(), "has tensor '6.weight'", "model 'mlp' does not"});
  expect_input_error(
      [&] { load_weights_file(dir / "w.pt", "mlp", std::nullopt, walk, NonFinite::Refuse); },
      {"w.pt", "unknown weights file extension '.pt'", ".safetensors or .h5"});
}

}  // namespace
}  // namespace noeira
