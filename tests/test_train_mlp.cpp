// Smoke test of the whole training step on the CPU: an MLP learns four gaussian blobs with Adam
// and cross-entropy (forward → loss → vjp → clip → step, with a warmup-cosine schedule).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "distributed/sharded_step.hpp"
#include "distributed/units.hpp"
#include "loss/accuracy.hpp"
#include "loss/cross_entropy.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"
#include "optim/clip.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"

namespace noeira {
namespace {

constexpr std::int64_t kClasses = 4;
constexpr std::int64_t kRows = 512;
constexpr std::int64_t kBatch = 32;

struct Blobs {
  Tensor x;       // [kRows, 2]
  Tensor labels;  // [kRows]
};

// Class c is centred at (±2, ±2) (one quadrant per class), unit-ish spread.
Blobs make_blobs(std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> noise(0.0f, 0.8f);
  std::vector<float> x(static_cast<std::size_t>(kRows * 2));
  std::vector<std::int32_t> y(static_cast<std::size_t>(kRows));
  for (std::int64_t r = 0; r < kRows; ++r) {
    const auto c = static_cast<std::int32_t>(gen() % kClasses);
    const auto i = static_cast<std::size_t>(r);
    y[i] = c;
    x[2 * i] = (c & 1 ? 2.0f : -2.0f) + noise(gen);
    x[2 * i + 1] = (c & 2 ? 2.0f : -2.0f) + noise(gen);
  }
  return {Tensor::from_host({kRows, 2}, x), Tensor::from_host_ids({kRows}, y)};
}

TEST(TrainMlp, AdamLearnsGaussianBlobs) {
  Context ctx = Context::for_target(Target::Cpu);
  Sequential<LinearReLU<2, 32>, LinearReLU<32, 32>, Linear<32, kClasses>> net(
      Init(Target::Cpu, InitSpec{InitKind::KaimingNormal, 0.0f, 0.02f, 7}));
  const Blobs data = make_blobs(1234);
  CrossEntropyLoss loss;

  auto full_loss = [&] {
    return loss.forward(ctx, net.forward(ctx, data.x), data.labels) / kRows;
  };
  const double start = full_loss();
  ASSERT_TRUE(std::isfinite(start));

  OptimizerConfig cfg;
  cfg.kind = OptimizerKind::Adam;
  Optimizer opt(cfg);
  // The store of one rank owns the parameters and Adam's moments.
  dist::ParamStore store(dist::walk_units(net), dist::residency_of(dist::Policy::Ddp), 0, 1, ctx);
  const LrSchedule schedule{ScheduleKind::WarmupCosine, 1e-2f, 20, 300, 1e-3f};
  const std::int64_t batches = kRows / kBatch;
  for (std::int64_t step = 0; step < 300; ++step) {
    const std::int64_t b = step % batches;
    const Tensor x = data.x.view({kBatch, 2}, b * kBatch * 2);
    const Tensor y = data.labels.view({kBatch}, b * kBatch);
    const Tensor& logits = net.forward(ctx, x);
    const double batch_loss = loss.forward_backward(ctx, logits, y, 1.0f / kBatch);
    ASSERT_TRUE(std::isfinite(batch_loss)) << "step " << step;
    net.vjp(ctx, loss.grad(), InputGrad::Skip);
    clip_grad_norm(net, ctx, 5.0);
    dist::optimizer_step(store, opt, schedule.lr_at(step));
  }

  const double end = full_loss();
  EXPECT_LT(end, start / 4.0) << "loss went from " << start << " to " << end;
  const std::int64_t correct = count_correct(ctx, net.forward(ctx, data.x), data.labels);
  EXPECT_GE(correct, kRows * 9 / 10) << correct << " of " << kRows << " correct";
  EXPECT_EQ(opt.state().t, 300);
}

}  // namespace
}  // namespace noeira
