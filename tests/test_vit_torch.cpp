// One training step's forward and vjp of a small ViT, written for PyTorch to recompute
// (tests/vit_torch_check.py, the model in tests/torch_vit.py; ctest: tests/vit_torch.cmake), as
// test_gpt_torch.cpp does for the GPT: the same weights, the same batch, then the loss, the
// logits, the image gradient and every parameter gradient compared in float64.
//
// Into the directory $NOEIRA_VIT_TORCH_DIR:
//   model.h5   the weights, written as `noeira train` writes a run's model (io/params_file.hpp),
//              so the check reads them with h5py by their walk names
//   cases.bin  tests/torch_case_file.hpp's format: one case (the shape, labels and the mean loss
//              in its JSON) and the tensors "images" [B, C, H, W], "logits" [B, classes],
//              "dlogits", "dimages" (the images' gradient) and "grad/<name>" for every parameter
// Without the variable the test writes into a scratch directory and removes it.
//
// The images have two channels and are not square, and the patches neither one row nor one
// column of them, so a layout slip in the patch rearrangement cannot pass. The loss is the
// classification task's: CrossEntropyLoss over the [B, classes] logits with gradient scale 1/B.
// Before the step, one on a batch of another size (stale state must not leak) and every gradient
// filled with a poison value (each must be overwritten).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attention_util.hpp"
#include "distributed/units.hpp"
#include "io/params_file.hpp"
#include "loss/cross_entropy.hpp"
#include "nn/vit.hpp"
#include "torch_case_file.hpp"
#include "train/checkpointing.hpp"

namespace noeira {
namespace {

constexpr VitShape kShape{ImageShape{2, 12, 8}, 4, 2, 2, 16, 5};  // 3 x 2 patches, 7 tokens
using Model = Vit<kShape>;

struct StepResult {
  double loss = 0.0;  // mean over the rows
  Tensor logits;      // [B, classes] (copies: the model's buffers are reused)
  Tensor dlogits;
  Tensor dimages;     // [B, C, H, W]
};

StepResult step(Model& model, Context& ctx, CrossEntropyLoss& loss, const Tensor& images,
                const std::vector<std::int32_t>& labels) {
  const std::int64_t rows = images.dim(0);
  const Tensor targets = Tensor::from_host_ids({rows}, labels, Target::Cpu);
  const Tensor& logits = model.forward(ctx, images);
  const double sum = loss.forward_backward(ctx, logits, targets, 1.0f / static_cast<float>(rows));
  StepResult r{sum / static_cast<double>(rows),
               Tensor::from_host(logits.shape(), logits.to_vector(), Target::Cpu),
               Tensor::from_host(logits.shape(), loss.grad().to_vector(), Target::Cpu), Tensor()};
  const Tensor& dx = model.vjp(ctx, loss.grad(), InputGrad::Compute);
  r.dimages = Tensor::from_host(images.shape(), dx.to_vector(), Target::Cpu);
  return r;
}

Tensor images(std::int64_t rows, std::uint32_t seed) {
  return Tensor::from_host(
      image_batch_shape(rows, kShape.image),
      testing::random_values(static_cast<std::size_t>(rows * kShape.image.numel()), seed));
}

void write_case(const std::filesystem::path& dir) {
  constexpr std::int64_t kBatch = 3;
  Model model(Init(Target::Cpu, InitSpec{InitKind::Normal, 0.0f, 0.02f, 5}));
  // Weights far from the initializer's (LayerNorm scales and every bias too), so that every
  // term of every gradient is visible.
  testing::randomize_weights(model, 91, 0.4f);
  Context ctx = Context::for_target(Target::Cpu);
  CrossEntropyLoss loss;

  step(model, ctx, loss, images(5, 3), {0, 1, 2, 3, 4});  // another batch size first
  for_each_param(model, [](const std::string&, Param& p) {
    p.grd.copy_from(std::vector<float>(static_cast<std::size_t>(p.numel()), 123.0f));
  });
  const Tensor batch = images(kBatch, 4);
  const std::vector<std::int32_t> labels = {4, 0, 2};
  const StepResult r = step(model, ctx, loss, batch, labels);
  ASSERT_TRUE(std::isfinite(r.loss));

  testing::save_model_file(dir / "model.h5", "vit-torch-case", model);

  testing::CaseFile file;
  file.add("images", batch);
  file.add("logits", r.logits);
  file.add("dlogits", r.dlogits);
  file.add("dimages", r.dimages);
  ASSERT_EQ(file.add_grads(model), dist::walk_units(model).params.size());
  file.add_case({{"name", "vit_small"},
                 {"model", "vit-torch-case"},
                 {"shape",
                  {{"channels", kShape.image.channels}, {"height", kShape.image.height},
                   {"width", kShape.image.width}, {"patch", kShape.patch},
                   {"layers", kShape.layers}, {"heads", kShape.heads}, {"dim", kShape.width},
                   {"classes", kShape.classes}}},
                 {"batch", kBatch},
                 {"labels", labels},
                 {"loss", r.loss}});
  file.write((dir / "cases.bin").string());
}

TEST(VitTorch, WritesTheCase) {
  testing::write_case_dir("NOEIRA_VIT_TORCH_DIR", "noeira_vit_torch", write_case);
}

}  // namespace
}  // namespace noeira
