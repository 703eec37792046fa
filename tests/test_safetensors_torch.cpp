// noeira and PyTorch exchange weights through safetensors files under `--names pytorch`
// (ctest: tests/safetensors_torch.cmake, with tests/safetensors_torch_check.py):
//
//   WritesNoeiraModels  exports mlp, gpt-tiny, resnet18 and lstm-tiny (PyTorch names) with their logits on
//                       fixed inputs: noeira_<preset>.safetensors, noeira_<preset>_io.safetensors
//                       ("x", "logits"); the python check loads them into torch.nn.Sequential,
//                       a GPT-2, torchvision's resnet18 and an nn.LSTM language model and
//                       compares the logits.
//   ReadsTorchModels    loads torch_<preset>.safetensors, which the python script wrote from
//                       those torch models (GPT-2's Conv1D layout, its mask buffers, I64
//                       num_batches_tracked), and reproduces the logits it stored beside them.
//
// Both read the directory $NOEIRA_SAFETENSORS_TORCH_DIR and skip without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "attention_util.hpp"
#include "distributed/units.hpp"
#include "gradcheck.hpp"
#include "train/presets.hpp"
#include "train/weights_file.hpp"

namespace noeira {
namespace {

std::optional<std::filesystem::path> case_dir() {
  const char* env = std::getenv("NOEIRA_SAFETENSORS_TORCH_DIR");
  if (env == nullptr || *env == '\0') return std::nullopt;
  return std::filesystem::path(env);
}

constexpr std::int64_t kGptBatch = 2;

// The model's input: images as rows of floats, a GPT's token ids (stored as floats, exact).
template <class M>
Tensor model_input(const std::vector<float>& x) {
  if constexpr (LanguageModel<M>) {
    std::vector<std::int32_t> ids(x.begin(), x.end());
    return Tensor::from_host_ids({kGptBatch, static_cast<std::int64_t>(ids.size()) / kGptBatch},
                                 ids, Target::Cpu);
  } else {
    return Tensor::from_host({static_cast<std::int64_t>(x.size()) / M::in_dim, M::in_dim}, x);
  }
}

template <class M>
std::vector<float> eval_logits(M& model, const std::vector<float>& x) {
  Context ctx = Context::for_target(Target::Cpu);
  ctx.mode = Mode::Eval;
  return model.forward(ctx, model_input<M>(x)).to_vector();
}

template <class M>
std::vector<float> fixed_input(std::int64_t rows) {
  if constexpr (LanguageModel<M>) {
    std::vector<float> ids(static_cast<std::size_t>(kGptBatch * M::block));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<float>((i * 37 + 11) % 256);
    return ids;
  } else {
    return testing::random_values(static_cast<std::size_t>(rows * M::in_dim), 5, -2.0f, 2.0f);
  }
}

template <class M>
void write_noeira_case(const std::filesystem::path& dir, const std::string& preset) {
  M model(Init(Target::Cpu, InitSpec{InitKind::KaimingNormal, 0.0f, 0.02f, 3}));
  const std::vector<float> x = fixed_input<M>(2);
  if (dist::walk_units(model).buffers.empty()) {
    // Weights far from the initializer's (LayerNorm scales and biases too), so that every
    // parameter shows in the logits.
    testing::randomize_weights(model, 91, 0.4f);
  } else {
    // One training-mode forward moves BatchNorm's running statistics off 0 and 1.
    Context train = Context::for_target(Target::Cpu);
    (void)model.forward(train, model_input<M>(x));
  }
  const std::vector<float> logits = eval_logits(model, x);
  save_weights_safetensors(dir / ("noeira_" + preset + ".safetensors"), preset,
                           NameMap::for_preset(NameScheme::Pytorch, preset),
                           dist::walk_units(model), {}, NonFinite::Refuse);
  io::save_safetensors(dir / ("noeira_" + preset + "_io.safetensors"),
                       {{"x", {static_cast<std::int64_t>(x.size())}, x},
                        {"logits", {static_cast<std::int64_t>(logits.size())}, logits}});
}

TEST(SafetensorsTorch, WritesNoeiraModels) {
  const auto dir = case_dir();
  if (!dir) GTEST_SKIP() << "NOEIRA_SAFETENSORS_TORCH_DIR unset (tests/safetensors_torch.cmake)";
  std::filesystem::create_directories(*dir);
  write_noeira_case<presets::Mlp>(*dir, "mlp");
  write_noeira_case<presets::GptTiny>(*dir, "gpt-tiny");
  write_noeira_case<presets::ResNet18Cifar>(*dir, "resnet18");
  write_noeira_case<presets::LstmTiny>(*dir, "lstm-tiny");
}

template <class M>
void expect_torch_logits(const std::filesystem::path& dir, const std::string& preset) {
  SCOPED_TRACE(preset);
  const std::filesystem::path weights = dir / ("torch_" + preset + ".safetensors");
  const io::SafetensorsFile io = io::SafetensorsFile::open(dir / ("torch_" + preset +
                                                                  "_io.safetensors"));
  const std::vector<float> x = io.read_float(*io.find("x"));
  const std::vector<float> expected = io.read_float(*io.find("logits"));
  M model(Init(Target::Cpu, InitSpec{InitKind::KaimingNormal, 0.0f, 0.02f, 4}));
  load_weights_file(weights, preset, NameScheme::Pytorch, dist::walk_units(model), NonFinite::Refuse);
  const std::vector<float> got = eval_logits(model, x);
  ASSERT_EQ(got.size(), expected.size());
  double scale = 1.0;
  for (const float v : expected) scale = std::max(scale, std::abs(static_cast<double>(v)));
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - expected[i]));
  }
  EXPECT_LE(worst, 1e-5 * scale) << preset << ": logits differ from PyTorch's by " << worst;
}

TEST(SafetensorsTorch, ReadsTorchModels) {
  const auto dir = case_dir();
  if (!dir) GTEST_SKIP() << "NOEIRA_SAFETENSORS_TORCH_DIR unset (tests/safetensors_torch.cmake)";
  // The python writer skips (77) where torch is missing; then there is nothing to read.
  if (!std::filesystem::exists(*dir / "torch_mlp_io.safetensors")) {
    GTEST_SKIP() << "no " << (*dir / "torch_mlp_io.safetensors").string()
                 << " (safetensors_torch_write_torch skipped: no torch?)";
  }
  expect_torch_logits<presets::Mlp>(*dir, "mlp");
  expect_torch_logits<presets::GptTiny>(*dir, "gpt-tiny");
  expect_torch_logits<presets::ResNet18Cifar>(*dir, "resnet18");
  expect_torch_logits<presets::LstmTiny>(*dir, "lstm-tiny");
}

}  // namespace
}  // namespace noeira
