// The losses' CUDA kernels against the CPU reference (tests/cuda_compare.hpp): every row loss,
// the cross-entropy's ignore index and bad labels, the loss sum kept on the device, and the
// accuracy count. Without a CUDA device (or in a build without CUDA) every test is skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_compare.hpp"
#include "gpu_skip.hpp"
#include "gradcheck.hpp"
#include "loss/cross_entropy.hpp"

namespace noeira {
namespace {

using testing::expect_same_on_both;
using testing::ids_on;
using testing::on;
using testing::Outputs;
using testing::random_on;
using testing::random_values;
using testing::Tol;

// Every row loss with and without a gradient. A vocabulary of 5000 is many elements per thread
// of the block per row; every fifth row of cross-entropy carries the ignore index.
TEST(CudaVsCpu, LossesWithAndWithoutGradient) {
  NOEIRA_REQUIRE_GPU();
  for (std::int64_t classes : {1, 10, 257, 5000}) {
    SCOPED_TRACE("classes " + std::to_string(classes));
    expect_same_on_both(
        [classes](Target t) {
          const KernelTable& k = kernels_for(t);
          const std::int64_t rows = 45;
          const std::int32_t ignore = -100;
          std::vector<std::int32_t> label_values;
          for (std::int64_t r = 0; r < rows; ++r) {
            label_values.push_back(r % 5 == 2 ? ignore
                                              : static_cast<std::int32_t>((r * 7) % classes));
          }
          Tensor labels = ids_on(t, label_values);
          Tensor logits = random_on(t, {rows, classes}, 81, -20.0f, 20.0f);
          Tensor target = random_on(t, {rows, classes}, 82, 0.0f, 0.2f);  // not summing to one
          // Two-hot: scalars past both ends of [-1, 1]. Gaussian NLL: means then variances, kept
          // off the floor, whose 1/v² would dwarf the tolerance; it reads the first cols/2 of
          // each target row.
          Tensor scalars = random_on(t, {rows}, 85, -1.5f, 1.5f);
          Tensor moments = random_on(t, {rows, classes}, 86, 0.05f, 2.0f);
          Tensor loss({rows}, t);
          Tensor grad({rows, classes}, t);
          Outputs o;
          const auto run = [&](LossKind kind, const char* name, float scale) {
            RowLossArgs a;
            a.row_loss = loss.data();
            a.grad = grad.data();
            a.pred = logits.data();
            a.rows = rows;
            a.cols = classes;
            a.grad_scale = scale;
            if (kind == LossKind::CrossEntropy) {
              a.labels = labels.ids();
              a.ignore_index = ignore;
            } else if (kind == LossKind::TwoHot) {
              a.target = scalars.data();
              a.bin_low = -1.0f;
              a.bin_high = 1.0f;
            } else if (kind == LossKind::GaussianNll) {
              a.pred = moments.data();
              a.target = target.data();
            } else {
              a.target = target.data();
            }
            k.row_loss(nullptr, kind, a);
            o.emplace_back(std::string(name) + " loss", loss.to_vector());
            o.emplace_back(std::string(name) + " grad", grad.to_vector());
            a.grad = nullptr;
            k.row_loss(nullptr, kind, a);
            o.emplace_back(std::string(name) + " loss only", loss.to_vector());
          };
          run(LossKind::CrossEntropy, "ce", 0.25f);
          run(LossKind::SoftCrossEntropy, "soft ce", 0.5f);
          run(LossKind::Mse, "mse", 2.0f);
          run(LossKind::TwoHot, "two-hot", 0.25f);
          if (classes % 2 == 0) run(LossKind::GaussianNll, "gaussian nll", 0.5f);  // 2·d columns
          return o;
        },
        Tol{1e-5, 1e-5});
  }
}

// Labels are not checked on the device: one outside [0, classes) that is not the ignore index
// must give a NaN row (loss and gradient) and leave the other rows alone, never read out of
// bounds.
TEST(CudaVsCpu, CrossEntropyBadLabelsGiveNanRows) {
  NOEIRA_REQUIRE_GPU();
  const std::int64_t rows = 6, classes = 700;
  const std::vector<std::int32_t> label_values = {3, -5, 700, -1, 1 << 30, 699};
  const std::vector<bool> bad = {false, true, true, false, true, false};
  const std::vector<float> logit_values =
      random_values(static_cast<std::size_t>(rows * classes), 83, -5.0f, 5.0f);
  Outputs results[2];
  for (Target t : {Target::Cpu, Target::Cuda}) {
    const KernelTable& k = kernels_for(t);
    Tensor labels = ids_on(t, label_values);
    Tensor logits = on(t, {rows, classes}, logit_values);
    Tensor loss({rows}, t);
    Tensor grad({rows, classes}, t);
    RowLossArgs a;
    a.row_loss = loss.data();
    a.grad = grad.data();
    a.pred = logits.data();
    a.labels = labels.ids();
    a.rows = rows;
    a.cols = classes;
    a.ignore_index = -1;  // row 3 is ignored, not bad
    k.row_loss(nullptr, LossKind::CrossEntropy, a);
    results[t == Target::Cuda] = {{"loss", loss.to_vector()}, {"grad", grad.to_vector()}};
  }
  const std::vector<float>& loss = results[1][0].second;
  const std::vector<float>& grad = results[1][1].second;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::size_t ur = static_cast<std::size_t>(r);
    EXPECT_EQ(std::isnan(loss[ur]), bad[ur]) << "row " << r;
    for (std::int64_t c = 0; c < classes; ++c) {
      const float g = grad[static_cast<std::size_t>(r * classes + c)];
      ASSERT_EQ(std::isnan(g), bad[ur]) << "row " << r << " class " << c;
      if (r == 3) {
        ASSERT_EQ(g, 0.0f) << "ignored row, class " << c;
      }
    }
  }
  EXPECT_EQ(loss[3], 0.0f);
  expect_same_on_both([&](Target t) { return results[t == Target::Cuda]; }, Tol{1e-5, 1e-5});
}

// The loss as the trainer uses it: a language-model-sized vocabulary with padding rows, the sum
// added to a double on the device, twice, before anything is read back.
TEST(CudaModule, CrossEntropyLossSumsOnTheDevice) {
  NOEIRA_REQUIRE_GPU();
  const std::int64_t rows = 37, vocab = 5000;
  std::vector<std::int32_t> label_values;
  for (std::int64_t r = 0; r < rows; ++r) {
    label_values.push_back(r % 4 == 1 ? -100 : static_cast<std::int32_t>((r * 131) % vocab));
  }
  const std::vector<float> logit_values =
      random_values(static_cast<std::size_t>(rows * vocab), 84, -10.0f, 10.0f);
  expect_same_on_both(
      [&](Target t) {
        Context ctx = Context::for_target(t);
        CrossEntropyLoss loss(CrossEntropyOptions{.ignore_index = -100});
        const Tensor logits = on(t, {rows, vocab}, logit_values);
        const Tensor labels = ids_on(t, label_values);
        Tensor sum({1}, t, DType::F64);
        loss.forward_backward(ctx, logits, labels, 1.0f / rows, sum.as<double>());
        loss.forward(ctx, logits, labels, sum.as<double>());
        const double host = loss.forward(ctx, logits, labels);
        const double twice = sum.to_host<double>()[0];
        return Outputs{{"sum", {static_cast<float>(twice)}},
                       {"sum - 2 · host sum", {static_cast<float>(twice - 2.0 * host)}},
                       {"grad", loss.grad().to_vector()}};
      },
      Tol{1e-5, 1e-5});
}

TEST(CudaVsCpu, CountCorrectIsExactWithTies) {
  NOEIRA_REQUIRE_GPU();
  const std::int64_t rows = 1000, classes = 10;
  // Coarse values make ties frequent: the first maximum must win on both targets.
  std::vector<float> logits = random_values(static_cast<std::size_t>(rows * classes), 91);
  for (float& v : logits) v = std::round(v * 2.0f);
  std::vector<std::int32_t> labels;
  for (std::int64_t r = 0; r < rows; ++r) {
    labels.push_back(static_cast<std::int32_t>(r % classes));
  }
  std::int64_t counts[2] = {};
  for (Target t : {Target::Cpu, Target::Cuda}) {
    const KernelTable& k = kernels_for(t);
    Tensor x = on(t, {rows, classes}, logits);
    Tensor l = ids_on(t, labels);
    counts[t == Target::Cuda] = k.count_correct(nullptr, x.data(), l.ids(), rows, classes);
  }
  EXPECT_EQ(counts[1], counts[0]);
  EXPECT_GT(counts[0], 0);
  EXPECT_LT(counts[0], rows);
}

}  // namespace
}  // namespace noeira
