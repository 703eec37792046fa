// Activation checkpointing (nn/checkpointed.hpp): a model whose blocks recompute their forward in
// vjp gives the outputs, input gradients, parameter gradients and buffers of the same model run
// plainly, bit for bit (dropout masks, BatchNorm's running estimates moved once, batch sizes that
// grow and shrink, evaluation and generation after it); its blocks share one block's buffers, so
// the step's tensor bytes grow by the checkpoints alone with each block; and a unit inside a
// checkpointed module is refused under a policy. On a GPU (skipped without one), the same on device.
// And Repeat's shared backward buffers (ctx.shared_vjp_buffers, nn/repeat.hpp): the GPT's and
// the ViT's blocks give the bits of blocks with buffers of their own, plainly and checkpointed,
// while a block adds no backward bytes to the step.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/scratch_arena.hpp"
#include "distributed/units.hpp"
#include "expect_error.hpp"
#include "gpu_skip.hpp"
#include "model_input.hpp"
#include "leaf_util.hpp"
#include "nn/batchnorm.hpp"
#include "nn/checkpointed.hpp"
#include "nn/dropout.hpp"
#include "nn/gpt.hpp"
#include "nn/layernorm.hpp"
#include "nn/linear.hpp"
#include "nn/repeat.hpp"
#include "nn/residual.hpp"
#include "nn/resnet.hpp"
#include "nn/sequential.hpp"
#include "nn/unit.hpp"
#include "nn/vit.hpp"

namespace noeira {
namespace {

using testing::model_input;

// Dropout and BatchNorm inside checkpointed blocks, one block nested in another.
using Inner = Checkpointed<Residual<Sequential<LayerNorm<16>, Dropout<16, 300>, Linear<16, 16>>>>;
using DropoutNet =
    Sequential<Linear<6, 16>,
               Checkpointed<Residual<Sequential<BatchNorm1D<16>, ReLU<16>, Dropout<16, 200>,
                                                Linear<16, 16>>>>,
               Checkpointed<Sequential<Inner, Dropout<16, 100>, Inner>>, Linear<16, 3>>;
using SmallGpt = Gpt<GptShape{40, 8, 3, 2, 16}>;
using SmallVit = Vit<VitShape{ImageShape{1, 8, 8}, 4, 2, 2, 16, 4}>;
using SmallResNet = ResNetCifar<ImageShape{1, 8, 8}, 1, 3>;
// Repeats whose copies write their input gradient first (a Linear's product) and whose copies
// write it last (a residual sum): with one arena for every copy, each product would write its
// input gradient over the gradient it reads (these widths are large enough for the product to
// read it in blocks, so the test then fails).
using RepeatChain = Sequential<Linear<6, 512>, Repeat<3, Linear<512, 512>>, Linear<512, 8>,
                               Repeat<3, Residual<Sequential<LayerNorm<8>, LinearGELU<8, 8>>>>,
                               Linear<8, 3>>;

const Init kInit(Target::Cpu, InitSpec{InitKind::Normal, 0.0f, 0.1f, 7});

// What one training step gives back.
struct Pass {
  std::vector<float> output;
  std::vector<float> input_grad;
  std::vector<float> grads;    // every parameter's, in walk order
  std::vector<float> buffers;  // after the step
};

template <class M>
std::vector<float> walk_buffers(M& model) {
  std::vector<float> out;
  for_each_buffer(model, [&](const std::string&, Tensor& t) {
    const std::vector<float> v = t.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  });
  return out;
}

// A training step: forward, the gradient of Σ y·w for fixed weights w, vjp. moved_context: the
// vjp's context has moved on from the forward's (another seed, step and first row), as a
// caller's may have.
template <class M>
Pass step(M& model, const Tensor& x, ScratchArena* arena, std::uint64_t step_index,
          bool shared_vjp_buffers = true, bool moved_context = false) {
  Context ctx = Context::for_target(x.target());
  ctx.shared_vjp_buffers = shared_vjp_buffers;
  ctx.seed = 11;
  ctx.step = step_index;
  ctx.row_offset = 3;
  ctx.scratch = arena;
  Pass pass;
  const Tensor& y = model.forward(ctx, x);
  pass.output = y.to_vector();
  const Tensor w = Tensor::from_host(
      y.shape(), testing::random_values(static_cast<std::size_t>(y.numel()), 5 + step_index),
      x.target());
  if (moved_context) {
    ctx.seed += 1;
    ctx.step += 5;
    ctx.row_offset += 37;
  }
  const bool ids = x.dtype() == DType::I32;
  const Tensor& dx = model.vjp(ctx, w, ids ? InputGrad::Skip : InputGrad::Compute);
  if (!ids) pass.input_grad = dx.to_vector();
  for_each_param(model, [&](const std::string&, Param& p) {
    const std::vector<float> g = p.grd.to_vector();
    pass.grads.insert(pass.grads.end(), g.begin(), g.end());
  });
  pass.buffers = walk_buffers(model);
  return pass;
}

template <class M>
std::vector<float> evaluate(M& model, const Tensor& x, ScratchArena* arena) {
  Context ctx = Context::for_target(x.target());
  ctx.mode = Mode::Eval;
  ctx.scratch = arena;
  return model.forward(ctx, x).to_vector();
}

void expect_same(const Pass& plain, const Pass& checkpointed, const std::string& where) {
  EXPECT_EQ(plain.output, checkpointed.output) << where;
  EXPECT_EQ(plain.input_grad, checkpointed.input_grad) << where;
  EXPECT_EQ(plain.grads, checkpointed.grads) << where;
  EXPECT_EQ(plain.buffers, checkpointed.buffers) << where;
}

// Steps at batch sizes that grow and shrink (the arena's slots grow and are reused), then an
// evaluation with and without the arena, against a second copy of the model run plainly.
template <class M>
void expect_checkpointing_changes_no_bit(const std::vector<std::int64_t>& batches,
                                         Target target = Target::Cpu) {
  const Init init(target, kInit.spec());
  M plain(init);
  M checkpointed(init);
  ScratchArena arena;
  EXPECT_EQ(checkpoint_sites(checkpointed), checkpoint_sites(plain));
  ASSERT_GT(checkpoint_sites(checkpointed), 0u);
  for (std::size_t s = 0; s < batches.size(); ++s) {
    const Tensor x = model_input<M>(batches[s], static_cast<std::uint32_t>(s + 1), target);
    expect_same(step(plain, x, nullptr, s), step(checkpointed, x, &arena, s),
                "step " + std::to_string(s) + ", batch " + std::to_string(batches[s]));
  }
  EXPECT_GT(arena.slots(), 0u);
  const Tensor x = model_input<M>(batches.back() + 1, 99, target);
  const std::vector<float> reference = evaluate(plain, x, nullptr);
  EXPECT_EQ(evaluate(checkpointed, x, &arena), reference) << "evaluation in the arena";
  // Run plainly after the arena: no block may keep writing a buffer another block shares.
  EXPECT_EQ(evaluate(checkpointed, x, nullptr), reference) << "evaluation after the arena";
  expect_same(step(plain, x, nullptr, 7), step(checkpointed, x, nullptr, 7), "a plain step after");
}

TEST(Checkpointed, DropoutBatchNormAndNestedBlocksChangeNoBit) {
  expect_checkpointing_changes_no_bit<DropoutNet>({5, 9, 3});
}

// The recomputation draws the forward's dropout masks and takes its rows whatever the vjp's
// context says, as a plain model's leaves keep their forward's keys.
TEST(Checkpointed, RecomputationTakesTheForwardsContext) {
  DropoutNet plain(kInit);
  DropoutNet checkpointed(kInit);
  ScratchArena arena;
  const Tensor x = model_input<DropoutNet>(5, 1, Target::Cpu);
  expect_same(step(plain, x, nullptr, 2, true, true), step(checkpointed, x, &arena, 2, true, true),
              "a vjp in a moved context");
}

TEST(Checkpointed, GptChangesNoBit) { expect_checkpointing_changes_no_bit<SmallGpt>({2, 3, 1}); }

TEST(Checkpointed, VitChangesNoBit) { expect_checkpointing_changes_no_bit<SmallVit>({3, 5, 2}); }

TEST(Checkpointed, ResnetChangesNoBit) {
  expect_checkpointing_changes_no_bit<SmallResNet>({3, 4, 2});
}

// The scratch arena holds device memory the same way: on the GPU too, checkpointing is the plain
// run bit for bit (the CUDA kernels are deterministic).
TEST(CudaCheckpointed, GptAndResnetChangeNoBitOnTheGpu) {
  NOEIRA_REQUIRE_GPU();
  expect_checkpointing_changes_no_bit<SmallGpt>({2, 3, 1}, Target::Cuda);
  expect_checkpointing_changes_no_bit<SmallResNet>({3, 4, 2}, Target::Cuda);
}

TEST(Checkpointed, GenerationAfterCheckpointedTrainingIsThePlainModels) {
  SmallGpt plain(kInit);
  SmallGpt checkpointed(kInit);
  ScratchArena arena;
  const Tensor ids = model_input<SmallGpt>(2, 1);
  step(plain, ids, nullptr, 0);
  step(checkpointed, ids, &arena, 0);
  Context ctx = Context::for_target(Target::Cpu);
  ctx.mode = Mode::Eval;
  GptCache plain_cache, checkpointed_cache;
  plain.reset_cache(plain_cache, Target::Cpu, 2, SmallGpt::block);
  checkpointed.reset_cache(checkpointed_cache, Target::Cpu, 2, SmallGpt::block);
  const Tensor prompt = Tensor::from_host_ids({2, 3}, std::vector<std::int32_t>{1, 2, 3, 4, 5, 6});
  EXPECT_EQ(checkpointed.forward_cached(ctx, prompt, checkpointed_cache).to_vector(),
            plain.forward_cached(ctx, prompt, plain_cache).to_vector());
}

// The tensor bytes of a model's first training step beyond what it held before.
template <class M>
std::int64_t first_step_bytes(std::int64_t batch, bool checkpoint, bool shared_vjp_buffers) {
  M model(kInit);
  ScratchArena arena;
  const Tensor ids = model_input<M>(batch, 1);
  reset_peak_tensor_bytes(Target::Cpu);
  const std::int64_t before = tensor_bytes(Target::Cpu).live;
  step(model, ids, checkpoint ? &arena : nullptr, 0, shared_vjp_buffers);
  return tensor_bytes(Target::Cpu).peak - before;
}

// The bytes one more block adds to the first step: six blocks' step beyond two blocks', over 4.
std::int64_t per_block(bool checkpoint, bool shared_vjp_buffers) {
  using Two = Gpt<GptShape{40, 32, 2, 2, 32}>;
  using Six = Gpt<GptShape{40, 32, 6, 2, 32}>;
  return (first_step_bytes<Six>(4, checkpoint, shared_vjp_buffers) -
          first_step_bytes<Two>(4, checkpoint, shared_vjp_buffers)) /
         4;
}

TEST(Checkpointed, BlocksShareOneBlocksBuffersAndKeepTheirCheckpoints) {
  // A block's output [B, T, C]: what a checkpointed block keeps; with buffers of its own for the
  // backward, its input gradient as well.
  constexpr std::int64_t kOutput = 4 * 32 * 32 * 4;
  EXPECT_EQ(per_block(true, true), kOutput);
  EXPECT_EQ(per_block(true, false), 2 * kOutput);
  // Plainly, the backward buffers shared by the blocks take nothing per block: what is left is
  // the forward's, among them the attention probabilities [B, heads, T, T] (as large as kOutput).
  const std::int64_t shared = per_block(false, true);
  const std::int64_t own = per_block(false, false);
  EXPECT_GT(shared, 5 * kOutput) << "shared: " << shared;
  // What a block's backward held of its own: its input gradient, the probabilities' gradient and
  // the rest, all of it gone.
  EXPECT_GT(own - shared, 4 * kOutput) << "own: " << own << ", shared: " << shared;
}

// The same blocks with buffers of their own for the backward and with Repeat's shared ones:
// steps at batch sizes that grow and shrink, plainly and checkpointed, then a step with buffers
// of their own again after the shared ones.
template <class M>
void expect_shared_vjp_buffers_change_no_bit(const std::vector<std::int64_t>& batches,
                                             Target target = Target::Cpu) {
  const Init init(target, kInit.spec());
  M own(init);
  M shared(init);
  M checkpointed_own(init);
  M checkpointed_shared(init);
  ScratchArena arena_own, arena_shared;
  for (std::size_t s = 0; s < batches.size(); ++s) {
    const Tensor x = model_input<M>(batches[s], static_cast<std::uint32_t>(s + 1), target);
    const std::string where = "step " + std::to_string(s) + ", batch " + std::to_string(batches[s]);
    const Pass reference = step(own, x, nullptr, s, false);
    expect_same(reference, step(shared, x, nullptr, s, true), where);
    expect_same(reference, step(checkpointed_own, x, &arena_own, s, false), where + ", ckpt");
    expect_same(reference, step(checkpointed_shared, x, &arena_shared, s, true), where + ", ckpt");
  }
  const Tensor x = model_input<M>(batches.back() + 1, 99, target);
  expect_same(step(own, x, nullptr, 7, false), step(shared, x, nullptr, 7, false), "after");
}

TEST(SharedVjpBuffers, ChainsChangeNoBit) {
  expect_shared_vjp_buffers_change_no_bit<RepeatChain>({24, 40, 8});
  expect_shared_vjp_buffers_change_no_bit<DropoutNet>({5, 9, 3});
  expect_shared_vjp_buffers_change_no_bit<SmallResNet>({3, 4, 2});
  expect_shared_vjp_buffers_change_no_bit<SmallGpt>({2, 3, 1});
  expect_shared_vjp_buffers_change_no_bit<SmallVit>({3, 5, 2});
}

TEST(CudaSharedVjpBuffers, GptAndResnetChangeNoBitOnTheGpu) {
  NOEIRA_REQUIRE_GPU();
  expect_shared_vjp_buffers_change_no_bit<SmallGpt>({2, 3, 1}, Target::Cuda);
  expect_shared_vjp_buffers_change_no_bit<SmallResNet>({3, 4, 2}, Target::Cuda);
}

// A policy's unit hooks keep buffers of their own: they run with no arena active, though the
// blocks' vjps run in a chain's arenas (and, checkpointed, in the checkpoint arena).
TEST(SharedVjpBuffers, UnitHooksRunOutsideTheArenas) {
  struct Hooks final : UnitHooks {
    int calls = 0;
    int inside_an_arena = 0;
    void note() {
      ++calls;
      if (ScratchArena::active() != nullptr) ++inside_an_arena;
    }
    void before_forward(std::size_t) override { note(); }
    void after_forward(std::size_t) override { note(); }
    void before_vjp(std::size_t) override { note(); }
    void after_vjp(std::size_t) override { note(); }
  };
  for (const bool checkpoint : {false, true}) {
    SCOPED_TRACE(checkpoint ? "checkpointed" : "plain");
    SmallGpt model(kInit);
    dist::walk_units(model);  // numbers the units
    Hooks hooks;
    ScratchArena arena;
    Context ctx = Context::for_target(Target::Cpu);
    ctx.units = &hooks;
    ctx.scratch = checkpoint ? &arena : nullptr;
    const Tensor ids = model_input<SmallGpt>(2, 1);
    const Tensor& y = model.forward(ctx, ids);
    const Tensor dy = Tensor::from_host(
        y.shape(), testing::random_values(static_cast<std::size_t>(y.numel()), 5));
    model.vjp(ctx, dy, InputGrad::Skip);
    EXPECT_EQ(hooks.calls, 4 * (SmallGpt::shape.layers + 2));  // embeddings, blocks, head
    EXPECT_EQ(hooks.inside_an_arena, 0);
  }
}

// A Sequential's children share their backward buffers too: each layer of a deep stack adds its
// output to the step, no more; with buffers of their own, its input gradient as well.
TEST(SharedVjpBuffers, SequentialLayersAddOnlyTheirOutputs) {
  using Four = Sequential<Linear<256, 256>, Linear<256, 256>, Linear<256, 256>, Linear<256, 256>>;
  using Eight = Sequential<Linear<256, 256>, Linear<256, 256>, Linear<256, 256>, Linear<256, 256>,
                           Linear<256, 256>, Linear<256, 256>, Linear<256, 256>, Linear<256, 256>>;
  constexpr std::int64_t kOutput = 32 * 256 * 4;
  const auto per_layer = [](bool shared) {
    const std::int64_t eight = first_step_bytes<Eight>(32, false, shared);
    return (eight - first_step_bytes<Four>(32, false, shared)) / 4;
  };
  EXPECT_EQ(per_layer(true), kOutput);
  EXPECT_EQ(per_layer(false), 2 * kOutput);
}

TEST(Checkpointed, AUnitInsideIsRefusedUnderAPolicy) {
  using Net = Sequential<Unit<Linear<4, 4>>, Checkpointed<Unit<Linear<4, 4>>>>;
  Net model(kInit);
  dist::walk_units(model);  // numbers the units
  struct Hooks final : UnitHooks {
    void before_forward(std::size_t) override {}
    void after_forward(std::size_t) override {}
    void before_vjp(std::size_t) override {}
    void after_vjp(std::size_t) override {}
  } hooks;
  ScratchArena arena;
  Context ctx = Context::for_target(Target::Cpu);
  ctx.units = &hooks;
  ctx.scratch = &arena;
  const Tensor x = testing::random_input(2, 4, 1);
  testing::expect_error<Error>([&] { model.forward(ctx, x); }, {"Unit<Checkpointed<M>>"});
}

}  // namespace
}  // namespace noeira
