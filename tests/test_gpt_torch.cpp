// One training step's forward and vjp of the gpt-tiny preset, written for PyTorch to recompute
// (tests/gpt_torch_check.py, the model in tests/torch_gpt.py; ctest: tests/gpt_torch.cmake), the
// way llm.c checks itself against nanoGPT: the same weights, the same batch, then the loss, the
// logits and every parameter gradient compared in float64. Once with fp32 products, once in
// mixed precision (--precision bf16) as the trainer runs it: through a one-rank DDP policy whose
// units compute with the bf16 copy of the parameters (distributed/param_store.hpp), with bf16
// products. That case's model.h5 holds the fp32 masters: the check rounds them with PyTorch's own
// bfloat16 conversion before its reference, and rounds every product's operands alike.
//
// Into the directory $NOEIRA_GPT_TORCH_DIR:
//   model.h5   the weights, written as `noeira train` writes a run's model (io/params_file.hpp),
//              so the check reads them with h5py by their walk names
//   cases.bin  tests/torch_case_file.hpp's format: one case (the shape, ids, targets and the
//              mean loss in its JSON) and the tensors "logits" [B, T, V], "dlogits" (the loss's
//              gradient) and "grad/<name>" for every parameter of the walk
// Without the variable the test writes into a scratch directory and removes it.
//
// The batch is formed as the language-model task forms it (train/language_model.cpp): windows of
// T + 1 tokens, inputs the first T, targets the last T, CrossEntropyLoss over the [B·T, V] view
// of the logits with gradient scale 1/(B·T), then one vjp. Before it, a step on a batch of
// another shape (stale state must not leak) and every gradient filled with a poison value (each
// must be overwritten: position 15, which the batch does not reach, gets an exact 0).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "attention_util.hpp"
#include "distributed/sim_process_group.hpp"
#include "distributed/units.hpp"
#include "io/params_file.hpp"
#include "loss/cross_entropy.hpp"
#include "torch_case_file.hpp"
#include "train/checkpointing.hpp"
#include "train/presets.hpp"

namespace noeira {
namespace {

using Model = presets::GptTiny;  // vocab 256, block 16, 2 layers, 2 heads, width 32

// Token windows of seq + 1 ids, drawn from a few ids (so that the embedding's rows are hit more
// than once, the sum its gradient must be) with the table's first and last among them.
std::vector<std::int32_t> windows(std::int64_t batch, std::int64_t seq, std::uint32_t seed) {
  const std::int32_t pool[] = {0, 1, 2, 7, 31, 64, 100, 128, 200, 254, 255};
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::size_t> pick(0, std::size(pool) - 1);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * (seq + 1)));
  for (std::int32_t& id : ids) id = pool[pick(gen)];
  return ids;
}

struct Batch {
  std::vector<std::int32_t> ids;      // [B, T]
  std::vector<std::int32_t> targets;  // [B·T]
};

Batch split(const std::vector<std::int32_t>& w, std::int64_t batch, std::int64_t seq) {
  Batch b;
  for (std::int64_t r = 0; r < batch; ++r) {
    const auto row = w.begin() + r * (seq + 1);
    b.ids.insert(b.ids.end(), row, row + seq);
    b.targets.insert(b.targets.end(), row + 1, row + seq + 1);
  }
  return b;
}

struct StepResult {
  double loss = 0.0;  // mean over the B·T targets
  Tensor logits;      // [B, T, V] (a copy: the model's buffer is reused by the next forward)
  Tensor dlogits;     // [B, T, V]
};

// One forward and vjp; with a policy, through its unit hooks, as the trainer drives a step.
StepResult step(Model& model, Context& ctx, CrossEntropyLoss& loss, const Batch& b,
                std::int64_t batch, std::int64_t seq, dist::ShardingPolicy* policy) {
  const Tensor ids = Tensor::from_host_ids({batch, seq}, b.ids, Target::Cpu);
  const Tensor targets = Tensor::from_host_ids({batch * seq}, b.targets, Target::Cpu);
  const Tensor& logits =
      policy != nullptr ? dist::forward_units(model, ctx, ids, *policy) : model.forward(ctx, ids);
  const std::int64_t tokens = batch * seq;
  const double sum = loss.forward_backward(ctx, logits.view({tokens, Model::vocab}), targets,
                                           1.0f / static_cast<float>(tokens));
  StepResult r{sum / static_cast<double>(tokens),
               Tensor::from_host(logits.shape(), logits.to_vector(), Target::Cpu),
               Tensor::from_host(logits.shape(), loss.grad().to_vector(), Target::Cpu)};
  const Tensor dy = loss.grad().view(logits.shape());
  if (policy != nullptr) {
    dist::vjp_units(model, ctx, dy, InputGrad::Skip, *policy);
  } else {
    model.vjp(ctx, dy, InputGrad::Skip);
  }
  return r;
}

void write_case(const std::filesystem::path& dir, Precision precision) {
  constexpr std::int64_t kBatch = 3, kSeq = 15;  // T odd and short of the block (16)
  static_assert(kSeq < Model::block);
  Model model(Init(Target::Cpu, InitSpec{InitKind::Normal, 0.0f, 0.02f, 5}));
  // Weights far from the initializer's (LayerNorm scales and every bias too), so that every
  // term of every gradient is visible.
  testing::randomize_weights(model, 91, 0.4f);
  Context ctx = Context::for_target(Target::Cpu, nullptr, precision);
  ctx.bf16_activations = true;  // as the trainer runs it: norms and GELU hold bits
  CrossEntropyLoss loss;
  const dist::WalkUnits walk = dist::walk_units(model);
  const std::vector<float> masters = testing::walk_values(walk);
  const bool mixed = precision == Precision::Bf16;

  const Batch b = split(windows(kBatch, kSeq, 4), kBatch, kSeq);
  StepResult r;
  testing::CaseFile file;
  // The whole step inside the (one-rank) world: the policy's store owns the parameters.
  dist::run_simulated(1, [&](dist::ProcessGroup& group) {
    std::optional<dist::ShardingPolicy> policy;
    if (mixed) {
      dist::PolicyOptions options;
      options.param_dtype = DType::BF16;
      policy.emplace(dist::Policy::Ddp, walk, group, ctx, options);
    }
    dist::ShardingPolicy* driver = policy ? &*policy : nullptr;
    step(model, ctx, loss, split(windows(2, 7, 3), 2, 7), 2, 7, driver);  // another shape first
    for_each_param(model, [](const std::string&, Param& p) {
      p.grd.copy_from(std::vector<float>(static_cast<std::size_t>(p.numel()), 123.0f));
    });
    r = step(model, ctx, loss, b, kBatch, kSeq, driver);
    ASSERT_EQ(file.add_grads(model), walk.params.size());
  });
  ASSERT_TRUE(std::isfinite(r.loss));

  io::save_params(dir / "model.h5", "gpt-tiny", signature_of(walk), masters);

  file.add("logits", r.logits);
  file.add("dlogits", r.dlogits);
  constexpr GptShape s = Model::shape;
  file.add_case({{"name", "gpt_tiny"},
                 {"model", "gpt-tiny"},
                 {"shape",
                  {{"vocab", s.vocab}, {"block", s.block}, {"layers", s.layers},
                   {"heads", s.heads}, {"width", s.width}}},
                 {"batch", kBatch},
                 {"seq", kSeq},
                 {"ids", b.ids},
                 {"targets", b.targets},
                 {"loss", r.loss},
                 {"precision", to_string(precision)},
                 {"parameters", mixed ? "bf16 copy of the masters" : "fp32"}});
  file.write((dir / "cases.bin").string());
}

TEST(GptTorch, WritesTheCase) {
  testing::write_case_dir("NOEIRA_GPT_TORCH_DIR", "noeira_gpt_torch",
                          [](const std::filesystem::path& dir) { write_case(dir, Precision::Fp32); });
}

// The same step in mixed precision (--precision bf16): the check rounds the masters and the
// operands of every product of its reference the same way.
TEST(GptTorch, WritesTheBf16Case) {
  testing::write_case_dir("NOEIRA_GPT_TORCH_BF16_DIR", "noeira_gpt_torch_bf16",
                          [](const std::filesystem::path& dir) { write_case(dir, Precision::Bf16); });
}

}  // namespace
}  // namespace noeira
