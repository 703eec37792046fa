// Activations held in bfloat16 under --precision bf16 (core/bf16_activation.hpp): the typed
// Linear and norm kernels on bits give the kernels' results on the values the bits were rounded
// from (the outputs rounded), on the CPU and (skipped without one) on a GPU; a GPT and a ViT
// train, evaluate and generate the same bits with their norms' and GELU Linears' outputs held
// as bits, plainly and checkpointed, and hold exactly the bytes that saves; nothing changes
// under fp32 products; and a module that does not read bits refuses them.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/bf16_activation.hpp"
#include "core/scratch_arena.hpp"
#include "cuda_compare.hpp"
#include "expect_error.hpp"
#include "gpu_skip.hpp"
#include "model_input.hpp"
#include "gradcheck.hpp"
#include "kernels/bf16_math.hpp"
#include "kernels/kernel_table.hpp"
#include "nn/activation.hpp"
#include "nn/gpt.hpp"
#include "nn/layernorm.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"
#include "nn/vit.hpp"

namespace noeira {
namespace {

using testing::model_input;

using testing::random_on;
using testing::random_values;

// Vocabulary 40, block 8, 3 layers, 2 heads, width 16.
using SmallGpt = Gpt<GptShape{40, 8, 3, 2, 16}>;
using SmallVit = Vit<VitShape{ImageShape{1, 8, 8}, 4, 2, 2, 16, 4}>;

Tensor bits_of(const KernelTable& k, const Tensor& values) {
  Tensor bits({values.numel()}, k.target, DType::BF16);
  k.to_bf16(nullptr, bits.as<std::uint16_t>(), values.data(), values.numel());
  k.synchronize(nullptr);
  return bits;
}
std::vector<std::uint16_t> host_bits(const Tensor& bits) { return bits.to_host<std::uint16_t>(); }

void expect_kernels_on_bits_are_the_kernels_on_values(Target target) {
  const KernelTable& k = kernels_for(target, Precision::Bf16);
  constexpr std::int64_t rows = 13, in = 24, out = 20;
  const Tensor x = random_on(target, {rows * in}, 1);
  const Tensor w = random_on(target, {out * in}, 2);
  const Tensor b = random_on(target, {out}, 3);
  const Tensor dy = random_on(target, {rows * out}, 4);
  const Tensor x16 = bits_of(k, x);

  for (const Activation act : {Activation::GeluTanh, Activation::SiLU}) {
    SCOPED_TRACE(std::string(to_string(act)));
    // The values' forward, fp32 out.
    Tensor y({rows * out}, target), pre({rows * out}, target);
    k.linear_forward(nullptr, act, y.data(), pre.data(), x.data(), w.data(), b.data(), rows, in,
                     out);
    // Bits in, fp32 out: the same bits.
    Tensor y_b({rows * out}, target), pre_b({rows * out}, target);
    k.linear_forward_typed(nullptr, act, y_b.data(), DType::F32, pre_b.data(),
                           x16.as<std::uint16_t>(), DType::BF16, w.data(), b.data(), rows, in,
                           out);
    EXPECT_EQ(y_b.to_vector(), y.to_vector()) << "bits in";
    EXPECT_EQ(pre_b.to_vector(), pre.to_vector()) << "bits in";
    // Bits in, bits out: the output rounded, the pre-activation the same.
    Tensor y16({rows * out}, target, DType::BF16), pre16({rows * out}, target);
    k.linear_forward_typed(nullptr, act, y16.as<std::uint16_t>(), DType::BF16, pre16.data(),
                           x16.as<std::uint16_t>(), DType::BF16, w.data(), b.data(), rows, in,
                           out);
    EXPECT_EQ(host_bits(y16), host_bits(bits_of(k, y))) << "bits out";
    EXPECT_EQ(pre16.to_vector(), pre.to_vector()) << "bits out";

    // The backward on the values and on their bits (pre standing in for the output): every
    // gradient the same; dw accumulates onto a start of its own.
    auto backward = [&](const void* xs, DType x_dtype, const float* ys) {
      Tensor dx({rows * in}, target), dpre({rows * out}, target), db({out}, target);
      Tensor dw = random_on(target, {out * in}, 5);
      k.linear_backward_typed(nullptr, act, GradMode::Accumulate, dx.data(), dw.data(),
                              db.data(), dpre.data(), dy.data(), xs, x_dtype, w.data(), ys,
                              pre.data(), rows, in, out);
      std::vector<float> all = dx.to_vector();
      for (const Tensor* t : {&dw, &db}) {
        const std::vector<float> v = t->to_vector();
        all.insert(all.end(), v.begin(), v.end());
      }
      return all;
    };
    EXPECT_EQ(backward(x16.as<std::uint16_t>(), DType::BF16, pre.data()),
              backward(x.data(), DType::F32, y.data()))
        << "backward: dx, dw, db";
  }

  // A LayerNorm's output as bits: the values rounded, the statistics the same.
  const Tensor gamma = random_on(target, {in}, 6, 0.5f, 1.5f);
  Tensor ny({rows * in}, target), mean({rows}, target), rstd({rows}, target);
  k.norm_forward(nullptr, ny.data(), mean.data(), rstd.data(), x.data(), gamma.data(), b.data(),
                 rows, in, 1e-5f);
  Tensor ny16({rows * in}, target, DType::BF16), mean16({rows}, target), rstd16({rows}, target);
  k.norm_forward_typed(nullptr, ny16.as<std::uint16_t>(), DType::BF16, mean16.data(),
                       rstd16.data(), x.data(), gamma.data(), b.data(), rows, in, 1e-5f);
  EXPECT_EQ(host_bits(ny16), host_bits(bits_of(k, ny)));
  EXPECT_EQ(mean16.to_vector(), mean.to_vector());
  EXPECT_EQ(rstd16.to_vector(), rstd.to_vector());
}

TEST(Bf16Activations, KernelsOnBitsAreTheKernelsOnTheirValues) {
  expect_kernels_on_bits_are_the_kernels_on_values(Target::Cpu);
}

TEST(CudaBf16Activations, KernelsOnBitsAreTheKernelsOnTheirValues) {
  NOEIRA_REQUIRE_GPU();
  expect_kernels_on_bits_are_the_kernels_on_values(Target::Cuda);
}

TEST(Bf16Activations, KernelsRefuseBitsTheyCannotTake) {
  const KernelTable& fp32 = kernels_for(Target::Cpu, Precision::Fp32);
  const KernelTable& bf16 = kernels_for(Target::Cpu, Precision::Bf16);
  std::vector<float> y(4), pre(4), w(4), b(2);
  std::vector<std::uint16_t> x16(4), y16(4);
  // fp32 products have no bfloat16 operand.
  testing::expect_error<Error>(
      [&] {
        fp32.linear_forward_typed(nullptr, Activation::GeluTanh, y.data(), DType::F32, pre.data(),
                                  x16.data(), DType::BF16, w.data(), b.data(), 2, 2, 2);
      },
      {"fp32 matrix product given a bf16 operand"});
  // A ReLU Linear's vjp reads its output: it is never bits.
  testing::expect_error<Error>(
      [&] {
        bf16.linear_forward_typed(nullptr, Activation::ReLU, y16.data(), DType::BF16, pre.data(),
                                  y.data(), DType::F32, w.data(), b.data(), 2, 2, 2);
      },
      {"bfloat16 output needs the pre-activation", "relu"});
}

// What one training step of a model gives back, and the tensor bytes its forward added.
struct Step {
  std::vector<float> output, grads, evaluation;
  std::int64_t forward_bytes = 0;
};


// Steps at batches that grow and shrink, then an evaluation; bf16 products throughout.
template <class M>
std::vector<Step> run(Precision precision, bool bf16_activations, bool checkpointed,
                      const std::vector<std::int64_t>& batches, Target target = Target::Cpu) {
  const Init init(target, InitSpec{InitKind::Normal, 0.0f, 0.1f, 7});
  M model(init);
  ScratchArena arena;
  std::vector<Step> steps;
  for (std::size_t s = 0; s < batches.size(); ++s) {
    Context ctx = Context::for_target(target, nullptr, precision);
    ctx.bf16_activations = bf16_activations;
    ctx.scratch = checkpointed ? &arena : nullptr;
    ctx.seed = 3;
    ctx.step = s;
    const Tensor x = model_input<M>(batches[s], static_cast<std::uint32_t>(s + 1), target);
    Step step;
    const std::int64_t before = tensor_bytes(target).live;
    const Tensor& y = model.forward(ctx, x);
    step.forward_bytes = tensor_bytes(target).live - before;
    step.output = y.to_vector();
    const Tensor dy = Tensor::from_host(
        y.shape(), random_values(static_cast<std::size_t>(y.numel()), 9 + s), target);
    model.vjp(ctx, dy, x.dtype() == DType::I32 ? InputGrad::Skip : InputGrad::Compute);
    for_each_param(model, [&](const std::string&, Param& p) {
      const std::vector<float> g = p.grd.to_vector();
      step.grads.insert(step.grads.end(), g.begin(), g.end());
    });
    ctx.mode = Mode::Eval;
    step.evaluation = model.forward(ctx, model_input<M>(2, 77, target)).to_vector();
    steps.push_back(std::move(step));
  }
  return steps;
}

template <class M>
void expect_same_bits(Precision precision, bool checkpointed, Target target = Target::Cpu) {
  const std::vector<std::int64_t> batches{3, 5, 2};
  const std::vector<Step> plain = run<M>(precision, false, checkpointed, batches, target);
  const std::vector<Step> held = run<M>(precision, true, checkpointed, batches, target);
  for (std::size_t s = 0; s < batches.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    EXPECT_EQ(held[s].output, plain[s].output);
    EXPECT_EQ(held[s].grads, plain[s].grads);
    EXPECT_EQ(held[s].evaluation, plain[s].evaluation);
  }
}

TEST(Bf16Activations, GptAndVitTrainTheBitsOfFp32Activations) {
  expect_same_bits<SmallGpt>(Precision::Bf16, false);
  expect_same_bits<SmallVit>(Precision::Bf16, false);
}

TEST(Bf16Activations, CheckpointedBlocksTooAndFp32ProductsUnchanged) {
  expect_same_bits<SmallGpt>(Precision::Bf16, true);
  expect_same_bits<SmallGpt>(Precision::Fp32, false);
}

TEST(CudaBf16Activations, GptTrainsTheBitsOfFp32ActivationsOnTheGpu) {
  NOEIRA_REQUIRE_GPU();
  expect_same_bits<SmallGpt>(Precision::Bf16, false, Target::Cuda);
}

// Each block's two norms and its GELU Linear hold their outputs in 2 bytes instead of 4: the
// forward's bytes fall by layers · rows · (C + C + 4C) · 2, and by nothing under fp32 products
// or when checkpointed blocks keep none of them.
TEST(Bf16Activations, HoldTheBytesTheySave) {
  constexpr std::int64_t batch = 3, rows = batch * SmallGpt::block, width = 16, layers = 3;
  auto first_forward_bytes = [&](Precision precision, bool held, bool checkpointed) {
    return run<SmallGpt>(precision, held, checkpointed, {batch})[0].forward_bytes;
  };
  EXPECT_EQ(first_forward_bytes(Precision::Bf16, false, false) -
                first_forward_bytes(Precision::Bf16, true, false),
            layers * rows * 6 * width * 2);
  EXPECT_EQ(first_forward_bytes(Precision::Fp32, true, false),
            first_forward_bytes(Precision::Fp32, false, false));
  // Checkpointed, the blocks' activations live in one block's slots: that block's fall.
  EXPECT_EQ(first_forward_bytes(Precision::Bf16, false, true) -
                first_forward_bytes(Precision::Bf16, true, true),
            rows * 6 * width * 2);
}

TEST(Bf16Activations, GenerationReadsTheHeldNorms) {
  const Init init(Target::Cpu, InitSpec{InitKind::Normal, 0.0f, 0.1f, 7});
  auto generate = [&](bool held) {
    SmallGpt model(init);
    Context ctx = Context::for_target(Target::Cpu, nullptr, Precision::Bf16);
    ctx.bf16_activations = held;
    ctx.mode = Mode::Eval;
    GptCache cache;
    model.reset_cache(cache, Target::Cpu, 2, SmallGpt::block);
    const Tensor prompt =
        Tensor::from_host_ids({2, 3}, std::vector<std::int32_t>{1, 2, 3, 4, 5, 6});
    return model.forward_cached(ctx, prompt, cache).to_vector();
  };
  EXPECT_EQ(generate(true), generate(false));
}

// The walk counts the holders: a GPT block's two norms and GELU layer, none in a ReLU MLP.
TEST(Bf16Activations, TheWalkCountsTheHolders) {
  const Init init(Target::Cpu, InitSpec{InitKind::Normal, 0.0f, 0.1f, 7});
  SmallGpt gpt(init);
  EXPECT_EQ(bf16_activation_sites(gpt), 3u * 3u);
  SmallVit vit(init);
  EXPECT_EQ(bf16_activation_sites(vit), 2u * 3u);
  Sequential<LinearReLU<4, 8>, LinearReLU<8, 8>, Linear<8, 2>> mlp(init);
  EXPECT_EQ(bf16_activation_sites(mlp), 0u);
  Sequential<LayerNorm<4>, LinearGELU<4, 8>, LinearSiLU<8, 8>, Linear<8, 2>> chain(init);
  EXPECT_EQ(bf16_activation_sites(chain), 3u);
}

// A module that reads its input as floats, handed bits, fails on the read.
TEST(Bf16Activations, AModuleThatDoesNotTakeBitsRefusesThem) {
  const Init init(Target::Cpu, InitSpec{InitKind::Normal, 0.0f, 0.1f, 7});
  LayerNorm<8> norm(init);
  norm.hold_output_in_bf16();
  ReLU<8> relu(init);
  Context ctx = Context::for_target(Target::Cpu, nullptr, Precision::Bf16);
  ctx.bf16_activations = true;
  const Tensor& bits = norm.forward(ctx, Tensor::from_host({2, 8}, random_values(16, 1)));
  ASSERT_EQ(bits.dtype(), DType::BF16);
  testing::expect_error<Error>([&] { relu.forward(ctx, bits); },
                               {"a bf16 tensor of shape [2, 8] read as f32"});
}

}  // namespace
}  // namespace noeira
