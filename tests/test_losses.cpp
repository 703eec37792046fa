#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "gradcheck.hpp"
#include "loss/accuracy.hpp"
#include "loss/cross_entropy.hpp"
#include "loss/gaussian_nll.hpp"
#include "loss/mse.hpp"
#include "loss/sequence_cross_entropy.hpp"
#include "loss/soft_cross_entropy.hpp"
#include "loss/two_hot.hpp"

namespace noeira {
namespace {

using testing::expect_input_error;
using testing::random_values;

Context cpu() { return Context::for_target(Target::Cpu); }

Tensor matrix(std::int64_t rows, std::int64_t cols, std::vector<float> values) {
  return Tensor::from_host({rows, cols}, values);
}

Tensor labels(std::vector<std::int32_t> ids) {
  return Tensor::from_host_ids({static_cast<std::int64_t>(ids.size())}, ids);
}

// Compares grad (for grad_scale) against central differences of scale · loss(x), the loss summed
// over rows in double.
void expect_gradient_matches(Tensor x, const std::vector<float>& grad, float scale,
                             const std::function<double(const Tensor&)>& loss) {
  std::vector<float> xv = x.to_vector();
  ASSERT_EQ(xv.size(), grad.size());
  const float eps = 1e-2f;
  for (std::size_t i = 0; i < xv.size(); ++i) {
    const float orig = xv[i];
    xv[i] = orig + eps;
    x.copy_from(xv);
    const double lp = loss(x);
    xv[i] = orig - eps;
    x.copy_from(xv);
    const double lm = loss(x);
    xv[i] = orig;
    x.copy_from(xv);
    const double numeric = scale * (lp - lm) / (2.0 * eps);
    EXPECT_NEAR(grad[i], numeric, 2e-4 + 1e-2 * std::abs(numeric)) << "element " << i;
  }
}

// --- cross-entropy ---------------------------------------------------------------------------

TEST(CrossEntropyLoss, UniformLogitsGiveLogClasses) {
  Context ctx = cpu();
  CrossEntropyLoss ce;
  const Tensor logits = matrix(3, 5, std::vector<float>(15, 2.5f));
  const double loss = ce.forward_backward(ctx, logits, labels({0, 4, 2}), 1.0f / 3.0f);
  EXPECT_NEAR(loss, 3.0 * std::log(5.0), 1e-5);
  // Gradient: (1/5 - onehot) / 3.
  const std::vector<float> g = ce.grad().to_vector();
  const std::vector<std::int32_t> lab = {0, 4, 2};
  for (std::int64_t r = 0; r < 3; ++r) {
    for (std::int64_t c = 0; c < 5; ++c) {
      const float expected = (0.2f - (c == lab[static_cast<std::size_t>(r)] ? 1.0f : 0.0f)) / 3.0f;
      EXPECT_NEAR(g[static_cast<std::size_t>(r * 5 + c)], expected, 1e-7);
    }
  }
}

TEST(CrossEntropyLoss, TwoClassClosedForm) {
  Context ctx = cpu();
  CrossEntropyLoss ce;
  // Row 0: -log σ(a - b) = log(1 + e^{b-a}) with a = 1, b = 3. Row 1: label 1 of [0, -2].
  const double loss = ce.forward(ctx, matrix(2, 2, {1, 3, 0, -2}), labels({0, 1}));
  EXPECT_NEAR(loss, std::log1p(std::exp(2.0)) + std::log1p(std::exp(2.0)), 1e-5);
}

TEST(CrossEntropyLoss, GradientMatchesFiniteDifferences) {
  Context ctx = cpu();
  CrossEntropyLoss ce;
  const Tensor lab = labels({3, 0, 6, 6, 1});
  Tensor logits = matrix(5, 7, random_values(35, 1, -3.0f, 3.0f));
  const float scale = 1.0f / 5.0f;
  ce.forward_backward(ctx, logits, lab, scale);
  CrossEntropyLoss eval;
  expect_gradient_matches(logits, ce.grad().to_vector(), scale,
                          [&](const Tensor& x) { return eval.forward(ctx, x, lab); });
}

TEST(CrossEntropyLoss, HugeLogitsStayFinite) {
  Context ctx = cpu();
  CrossEntropyLoss ce;
  const Tensor logits = matrix(2, 3, {1e4f, -1e4f, 0.0f, 1e4f, 1e4f, -1e4f});
  const double loss = ce.forward_backward(ctx, logits, labels({1, 0}), 1.0f);
  // Row 0: lse = 1e4, loss = 2e4. Row 1: two equal maxima, loss = log 2.
  EXPECT_NEAR(loss, 2e4 + std::log(2.0), 1e-2);
  const std::vector<float> g = ce.grad().to_vector();
  for (float v : g) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(g, (std::vector<float>{1.0f, -1.0f, 0.0f, -0.5f, 0.5f, 0.0f}));
}

TEST(CrossEntropyLoss, LabelOutOfRangeNamesRowAndLabel) {
  Context ctx = cpu();
  CrossEntropyLoss ce;
  const Tensor logits = matrix(3, 4, std::vector<float>(12, 0.0f));
  try {
    ce.forward_backward(ctx, logits, labels({0, 3, 4}), 1.0f);
    FAIL() << "label 4 of 4 classes was accepted";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("row 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("label 4"), std::string::npos) << msg;
  }
  EXPECT_THROW(ce.forward(ctx, logits, labels({0, -1, 1})), InputError);
  EXPECT_THROW(ce.forward(ctx, logits, labels({0, 1})), InputError);  // row count mismatch
}

TEST(CrossEntropyLoss, EvalForwardLeavesTheGradientAlone) {
  Context ctx = cpu();
  CrossEntropyLoss ce;
  ce.forward_backward(ctx, matrix(1, 3, {1, 2, 3}), labels({2}), 1.0f);
  const std::vector<float> before = ce.grad().to_vector();
  const double loss = ce.forward(ctx, matrix(1, 3, {5, 0, 0}), labels({1}));
  EXPECT_NEAR(loss, 5.0 + std::log(1.0 + 2.0 * std::exp(-5.0)), 1e-5);
  EXPECT_EQ(ce.grad().to_vector(), before);
}

TEST(CrossEntropyLoss, SameResultForAnyThreadCount) {
  Context ctx = cpu();
  const std::int64_t rows = 4096, classes = 10;  // past the parallel threshold
  const Tensor logits = matrix(rows, classes, random_values(rows * classes, 2, -4.0f, 4.0f));
  std::vector<std::int32_t> ids(rows);
  for (std::int64_t r = 0; r < rows; ++r) ids[static_cast<std::size_t>(r)] = r % classes;
  const Tensor lab = labels(ids);
  const int threads = omp_get_max_threads();
  CrossEntropyLoss a, b;
  omp_set_num_threads(1);
  const double la = a.forward_backward(ctx, logits, lab, 1.0f / rows);
  omp_set_num_threads(std::max(threads, 2));
  const double lb = b.forward_backward(ctx, logits, lab, 1.0f / rows);
  omp_set_num_threads(threads);
  EXPECT_EQ(la, lb);
  EXPECT_EQ(a.grad().to_vector(), b.grad().to_vector());
}

// --- cross-entropy with an ignore index ------------------------------------------------------

TEST(CrossEntropyLoss, IgnoredRowsContributeNothing) {
  Context ctx = cpu();
  // ignore_index 1 is itself a class: rows labelled 1 are ignored, as in torch.
  CrossEntropyLoss ce(CrossEntropyOptions{.ignore_index = 1});
  // Row 0: uniform over 3 classes, label 0: log 3. Row 1: ignored. Row 2: label 2 of [0, 0, ln 2]:
  // log(1 + 1 + 2) - ln 2 = ln 2.
  const Tensor logits = matrix(3, 3, {4, 4, 4, 9, -9, 0, 0, 0, std::log(2.0f)});
  const double loss = ce.forward_backward(ctx, logits, labels({0, 1, 2}), 1.0f);
  EXPECT_NEAR(loss, std::log(3.0) + std::log(2.0), 1e-6);
  const std::vector<float> g = ce.grad().to_vector();
  const std::vector<float> expected = {1.0f / 3 - 1, 1.0f / 3, 1.0f / 3,  // softmax - onehot
                                       0, 0, 0,                          // ignored
                                       0.25f, 0.25f, 0.5f - 1};
  for (std::size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], expected[i], 1e-6) << i;
  for (std::size_t i = 3; i < 6; ++i) EXPECT_EQ(g[i], 0.0f) << "ignored row, element " << i;
  // Every row ignored: nothing at all.
  EXPECT_EQ(ce.forward(ctx, logits, labels({1, 1, 1})), 0.0);
}

TEST(CrossEntropyLoss, GradientWithIgnoredRowsMatchesFiniteDifferences) {
  Context ctx = cpu();
  CrossEntropyLoss ce(CrossEntropyOptions{.ignore_index = -100});
  const Tensor lab = labels({3, -100, 6, -100, 1, 0});
  Tensor logits = matrix(6, 7, random_values(42, 11, -3.0f, 3.0f));
  const float scale = 1.0f / 4.0f;  // the mean over the 4 rows that count
  ce.forward_backward(ctx, logits, lab, scale);
  CrossEntropyLoss eval(CrossEntropyOptions{.ignore_index = -100});
  expect_gradient_matches(logits, ce.grad().to_vector(), scale,
                          [&](const Tensor& x) { return eval.forward(ctx, x, lab); });
}

TEST(CrossEntropyLoss, IgnoreIndexDoesNotLetOtherBadLabelsThrough) {
  Context ctx = cpu();
  CrossEntropyLoss ce(CrossEntropyOptions{.ignore_index = -100});
  const Tensor logits = matrix(2, 4, std::vector<float>(8, 0.0f));
  EXPECT_NO_THROW(ce.forward(ctx, logits, labels({-100, 3})));
  try {
    ce.forward(ctx, logits, labels({-100, -1}));
    FAIL() << "label -1 was accepted with ignore index -100";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("label -1 at row 1"), std::string::npos) << msg;
  }
}

// The kernel's own guard, which device labels rely on (the host checks stop bad labels in host
// memory before it): a bad label gives a NaN row, the other rows are untouched.
TEST(CrossEntropyLoss, KernelGivesNanRowsForBadLabels) {
  const KernelTable& k = kernels_for(Target::Cpu);
  const std::vector<float> logits = random_values(12, 12, -2.0f, 2.0f);
  const std::vector<std::int32_t> lab = {2, 4, -1, -7};
  std::vector<float> loss(4, 0.0f);
  std::vector<float> grad(12, 0.0f);
  RowLossArgs a;
  a.row_loss = loss.data();
  a.grad = grad.data();
  a.pred = logits.data();
  a.labels = lab.data();
  a.rows = 4;
  a.cols = 3;
  a.ignore_index = -7;
  k.row_loss(nullptr, LossKind::CrossEntropy, a);
  EXPECT_TRUE(std::isfinite(loss[0]) && loss[0] > 0.0f);
  EXPECT_TRUE(std::isnan(loss[1])) << "label 4 of 3 classes";
  EXPECT_TRUE(std::isnan(loss[2])) << "label -1";
  EXPECT_EQ(loss[3], 0.0f) << "ignored";
  for (std::size_t c = 0; c < 3; ++c) {
    EXPECT_TRUE(std::isfinite(grad[c]));
    EXPECT_TRUE(std::isnan(grad[3 + c]));
    EXPECT_TRUE(std::isnan(grad[6 + c]));
    EXPECT_EQ(grad[9 + c], 0.0f);
  }
}

// --- soft cross-entropy ----------------------------------------------------------------------

TEST(SoftCrossEntropyLoss, OneHotTargetsMatchCrossEntropy) {
  Context ctx = cpu();
  const Tensor logits = matrix(2, 3, random_values(6, 3, -2.0f, 2.0f));
  CrossEntropyLoss ce;
  SoftCrossEntropyLoss sce;
  const double hard = ce.forward_backward(ctx, logits, labels({2, 0}), 0.5f);
  const double soft = sce.forward_backward(ctx, logits, matrix(2, 3, {0, 0, 1, 1, 0, 0}), 0.5f);
  EXPECT_NEAR(soft, hard, 1e-5);
  const std::vector<float> gh = ce.grad().to_vector();
  const std::vector<float> gs = sce.grad().to_vector();
  for (std::size_t i = 0; i < gh.size(); ++i) EXPECT_NEAR(gs[i], gh[i], 1e-6);
}

TEST(SoftCrossEntropyLoss, UniformTargetsOnEqualLogitsGiveLogClasses) {
  Context ctx = cpu();
  SoftCrossEntropyLoss sce;
  const double loss =
      sce.forward(ctx, matrix(1, 4, {-7, -7, -7, -7}), matrix(1, 4, {0.25f, 0.25f, 0.25f, 0.25f}));
  EXPECT_NEAR(loss, std::log(4.0), 1e-6);
}

TEST(SoftCrossEntropyLoss, GradientMatchesFiniteDifferences) {
  Context ctx = cpu();
  SoftCrossEntropyLoss sce;
  // Targets that do not sum to one: the gradient must still be that of the formula.
  const Tensor targets = matrix(3, 5, random_values(15, 4, 0.0f, 0.6f));
  Tensor logits = matrix(3, 5, random_values(15, 5, -3.0f, 3.0f));
  sce.forward_backward(ctx, logits, targets, 0.25f);
  SoftCrossEntropyLoss eval;
  expect_gradient_matches(logits, sce.grad().to_vector(), 0.25f,
                          [&](const Tensor& x) { return eval.forward(ctx, x, targets); });
}

TEST(SoftCrossEntropyLoss, HugeLogitsStayFinite) {
  Context ctx = cpu();
  SoftCrossEntropyLoss sce;
  const double loss = sce.forward_backward(ctx, matrix(1, 3, {1e4f, -1e4f, 0.0f}),
                                           matrix(1, 3, {0.5f, 0.5f, 0.0f}), 1.0f);
  EXPECT_NEAR(loss, 1e4, 1e-2);  // 0.5·0 + 0.5·2e4
  for (float v : sce.grad().to_vector()) EXPECT_TRUE(std::isfinite(v));
}

TEST(SoftCrossEntropyLoss, RejectsMismatchedTargets) {
  Context ctx = cpu();
  SoftCrossEntropyLoss sce;
  const Tensor logits = matrix(2, 3, std::vector<float>(6));
  EXPECT_THROW(sce.forward(ctx, logits, matrix(3, 2, std::vector<float>(6))), InputError);
}

// --- mean squared error ----------------------------------------------------------------------

TEST(MSELoss, ClosedForm) {
  Context ctx = cpu();
  MSELoss mse;
  // Row 0: (1 + 4) / 2; row 1: (0 + 9) / 2.
  const double loss = mse.forward_backward(ctx, matrix(2, 2, {1, 2, 3, 4}),
                                           matrix(2, 2, {0, 0, 3, 1}), 0.5f);
  EXPECT_NEAR(loss, 7.0, 1e-6);
  // d/dp = 2 (p - t) / cols · scale = (p - t) / 2.
  EXPECT_EQ(mse.grad().to_vector(), (std::vector<float>{0.5f, 1.0f, 0.0f, 1.5f}));
}

TEST(MSELoss, GradientMatchesFiniteDifferences) {
  Context ctx = cpu();
  MSELoss mse;
  const Tensor target = matrix(4, 3, random_values(12, 6));
  Tensor pred = matrix(4, 3, random_values(12, 7));
  mse.forward_backward(ctx, pred, target, 0.25f);
  MSELoss eval;
  expect_gradient_matches(pred, mse.grad().to_vector(), 0.25f,
                          [&](const Tensor& x) { return eval.forward(ctx, x, target); });
}

TEST(MSELoss, RejectsMismatchedTarget) {
  Context ctx = cpu();
  MSELoss mse;
  EXPECT_THROW(mse.forward(ctx, matrix(2, 2, {1, 2, 3, 4}), matrix(1, 4, {1, 2, 3, 4})),
               InputError);
}

// --- two-hot ---------------------------------------------------------------------------------

Tensor scalars(std::vector<float> values) {
  return Tensor::from_host({static_cast<std::int64_t>(values.size())}, values);
}

// Every place a target can fall, against the soft cross-entropy with the two-hot encoding written
// out. Five bins on [-2, 2] sit at -2, -1, 0, 1, 2.
TEST(TwoHotLoss, EdgeTargetsMatchTheWrittenOutEncoding) {
  Context ctx = cpu();
  const std::int64_t rows = 7, bins = 5;
  const Tensor logits = matrix(rows, bins, random_values(rows * bins, 31, -3.0f, 3.0f));
  const Tensor y = scalars({0.0f,    // on bin 2
                            0.25f,   // 3/4 on bin 2, 1/4 on bin 3
                            -7.0f,   // below low: bin 0
                            9.0f,    // above high: bin 4
                            2.0f,    // at high: bin 4 (the last pair, all its weight on the top)
                            -2.0f,   // at low: bin 0
                            -1.5f});  // halfway between bins 0 and 1
  const Tensor encoded = matrix(rows, bins, {0, 0, 1, 0, 0,  //
                                             0, 0, 0.75f, 0.25f, 0,  //
                                             1, 0, 0, 0, 0,  //
                                             0, 0, 0, 0, 1,  //
                                             0, 0, 0, 0, 1,  //
                                             1, 0, 0, 0, 0,  //
                                             0.5f, 0.5f, 0, 0, 0});
  TwoHotLoss two_hot(-2.0f, 2.0f);
  SoftCrossEntropyLoss soft;
  const double a = two_hot.forward_backward(ctx, logits, y, 1.0f / rows);
  const double b = soft.forward_backward(ctx, logits, encoded, 1.0f / rows);
  EXPECT_NEAR(a, b, 1e-5);
  const std::vector<float> ga = two_hot.grad().to_vector();
  const std::vector<float> gb = soft.grad().to_vector();
  for (std::size_t i = 0; i < ga.size(); ++i) EXPECT_NEAR(ga[i], gb[i], 1e-6) << "element " << i;
}

// A NaN target is no position between bins: its row's loss and gradient are NaN, the others'
// untouched.
TEST(TwoHotLoss, ANanTargetPoisonsItsRowOnly) {
  Context ctx = cpu();
  const Tensor logits = matrix(2, 3, random_values(6, 33, -1.0f, 1.0f));
  TwoHotLoss two_hot(0.0f, 1.0f);
  EXPECT_TRUE(std::isnan(two_hot.forward_backward(ctx, logits, scalars({0.5f, NAN}), 0.5f)));
  const std::vector<float> g = two_hot.grad().to_vector();
  for (int c = 0; c < 3; ++c) {
    EXPECT_TRUE(std::isfinite(g[c])) << c;
    EXPECT_TRUE(std::isnan(g[3 + c])) << c;
  }
}

TEST(TwoHotLoss, OnABinIsCrossEntropyWithThatLabel) {
  Context ctx = cpu();
  const Tensor logits = matrix(2, 4, random_values(8, 32, -2.0f, 2.0f));
  TwoHotLoss two_hot(0.0f, 3.0f);
  CrossEntropyLoss ce;
  EXPECT_NEAR(two_hot.forward(ctx, logits, scalars({1.0f, 3.0f})),
              ce.forward(ctx, logits, labels({1, 3})), 1e-5);
}

TEST(TwoHotLoss, GradientMatchesFiniteDifferences) {
  Context ctx = cpu();
  const Tensor y = scalars({-1.3f, 0.0f, 4.9f, 20.0f, -20.0f});
  Tensor logits = matrix(5, 6, random_values(30, 33, -3.0f, 3.0f));
  TwoHotLoss two_hot(-5.0f, 5.0f);
  two_hot.forward_backward(ctx, logits, y, 0.2f);
  TwoHotLoss eval(-5.0f, 5.0f);
  expect_gradient_matches(logits, two_hot.grad().to_vector(), 0.2f,
                          [&](const Tensor& x) { return eval.forward(ctx, x, y); });
}

TEST(TwoHotLoss, BadRangeBinsAndTargetsAreNamed) {
  expect_input_error([] { TwoHotLoss bad(1.0f, 1.0f); }, {"TwoHotLoss", "low < high"});
  expect_input_error([] { TwoHotLoss bad(2.0f, -2.0f); }, {"TwoHotLoss", "low < high"});
  expect_input_error([] { TwoHotLoss bad(0.0f, NAN); }, {"TwoHotLoss", "finite"});
  Context ctx = cpu();
  TwoHotLoss two_hot(0.0f, 1.0f);
  const Tensor logits = matrix(2, 3, std::vector<float>(6));
  expect_input_error([&] { two_hot.forward(ctx, matrix(2, 1, {0, 0}), scalars({0, 0})); },
                     {"TwoHotLoss", "logits", "at least 2 bins"});
  expect_input_error([&] { two_hot.forward(ctx, logits, scalars({0, 0, 0})); },
                     {"TwoHotLoss", "target must be [2] f32", "[3]"});
  expect_input_error([&] { two_hot.forward(ctx, logits, matrix(2, 1, {0, 0})); },
                     {"TwoHotLoss", "target must be [2] f32", "[2, 1]"});
  expect_input_error([&] { two_hot.forward(ctx, logits, labels({0, 1})); },
                     {"TwoHotLoss", "target must be [2] f32"});
  expect_input_error([&] { two_hot.forward(ctx, scalars({0, 0}), scalars({0, 0})); },
                     {"TwoHotLoss", "logits must be a non-empty [rows, cols] f32"});
}

// --- Gaussian negative log-likelihood --------------------------------------------------------

TEST(GaussianNLLLoss, ClosedForm) {
  Context ctx = cpu();
  GaussianNLLLoss nll;
  // One row of d = 2: μ = (1, 0), v = (2, 0.5), target (0, 1).
  const double loss =
      nll.forward_backward(ctx, matrix(1, 4, {1, 0, 2, 0.5f}), matrix(1, 2, {0, 1}), 1.0f);
  EXPECT_NEAR(loss, 0.25 * (std::log(2.0) + 0.5 + std::log(0.5) + 2.0), 1e-6);
  // dμ = (μ - t) / v / d; dv = ½ (1/v - (μ - t)² / v²) / d.
  const std::vector<float> g = nll.grad().to_vector();
  const std::vector<float> expected = {0.25f, -1.0f, 0.25f * (0.5f - 0.25f), 0.25f * (2.0f - 4.0f)};
  for (std::size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], expected[i], 1e-6) << i;
}

TEST(GaussianNLLLoss, GradientMatchesFiniteDifferences) {
  Context ctx = cpu();
  const std::int64_t rows = 4, d = 3;
  std::vector<float> p = random_values(rows * 2 * d, 34, -2.0f, 2.0f);
  const std::vector<float> v = random_values(rows * d, 35, 0.5f, 2.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < d; ++c) {
      p[static_cast<std::size_t>(r * 2 * d + d + c)] = v[static_cast<std::size_t>(r * d + c)];
    }
  }
  Tensor pred = matrix(rows, 2 * d, p);
  const Tensor target = matrix(rows, d, random_values(rows * d, 36, -2.0f, 2.0f));
  GaussianNLLLoss nll;
  nll.forward_backward(ctx, pred, target, 0.25f);
  GaussianNLLLoss eval;
  expect_gradient_matches(pred, nll.grad().to_vector(), 0.25f,
                          [&](const Tensor& x) { return eval.forward(ctx, x, target); });
}

// torch clamps the variance under no_grad, so the gradient is that at the floor, passed through
// to the variance below it (not the zero a differentiated clamp would give).
TEST(GaussianNLLLoss, VarianceBelowTheFloorIsClampedAndPassesTheGradient) {
  Context ctx = cpu();
  GaussianNLLLoss nll(0.1f);
  // μ - t = 0.2 and v = 0.01, 0 (both below 0.1): as if v = 0.1.
  const double loss = nll.forward_backward(ctx, matrix(2, 2, {0.2f, 0.01f, 1.2f, 0.0f}),
                                           matrix(2, 1, {0.0f, 1.0f}), 1.0f);
  const double at_floor = 0.5 * (std::log(0.1) + 0.04 / 0.1);
  EXPECT_NEAR(loss, 2.0 * at_floor, 1e-5);
  const std::vector<float> g = nll.grad().to_vector();
  // dμ = 0.2 / 0.1 = 2; dv = ½ (1/0.1 - 0.04/0.01) = 3.
  for (std::size_t r = 0; r < 2; ++r) {
    EXPECT_NEAR(g[2 * r], 2.0f, 1e-5) << "row " << r;
    EXPECT_NEAR(g[2 * r + 1], 3.0f, 1e-4) << "row " << r;
  }
}

TEST(GaussianNLLLoss, NegativeVarianceAndBadShapesAreNamed) {
  Context ctx = cpu();
  GaussianNLLLoss nll;
  const Tensor target = matrix(3, 2, std::vector<float>(6));
  std::vector<float> p(12, 1.0f);
  p[2 * 4 + 3] = -0.5f;  // row 2, variance column 1
  expect_input_error([&] { nll.forward(ctx, matrix(3, 4, p), target); },
                     {"GaussianNLLLoss", "variance -0.5 at row 2, column 1", "pred", "negative"});
  expect_input_error([&] { nll.forward(ctx, matrix(3, 3, std::vector<float>(9, 1.0f)), target); },
                     {"GaussianNLLLoss", "pred has shape [3, 3]", "2·d"});
  const Tensor ones = matrix(3, 4, std::vector<float>(12, 1.0f));
  expect_input_error([&] { nll.forward(ctx, ones, matrix(3, 4, p)); },
                     {"GaussianNLLLoss", "target has shape [3, 4] but must be [3, 2]"});
  expect_input_error([&] { nll.forward(ctx, ones, scalars({0, 0, 0})); },
                     {"GaussianNLLLoss", "target must be a non-empty [rows, cols] f32"});
  expect_input_error([] { GaussianNLLLoss bad(0.0f); }, {"GaussianNLLLoss", "eps", "> 0"});
}

// --- sequence cross-entropy ------------------------------------------------------------------

Tensor sequence_labels(std::int64_t batch, std::int64_t steps, std::vector<std::int32_t> ids) {
  return Tensor::from_host_ids({batch, steps}, ids);
}

TEST(SequenceCrossEntropyLoss, IsTheMeanOfTheRowsThatCount) {
  Context ctx = cpu();
  const std::int64_t batch = 2, steps = 3, vocab = 5;
  const std::vector<float> values = random_values(batch * steps * vocab, 41, -3.0f, 3.0f);
  const std::vector<std::int32_t> ids = {4, -100, 0, 2, 2, -100};
  SequenceCrossEntropyLoss seq;
  const double mean = seq.forward_backward(
      ctx, Tensor::from_host({batch, steps, vocab}, values), sequence_labels(batch, steps, ids));
  CrossEntropyLoss ce(CrossEntropyOptions{.ignore_index = -100});
  const double sum = ce.forward_backward(ctx, matrix(batch * steps, vocab, values), labels(ids),
                                         0.25f);
  EXPECT_NEAR(mean, sum / 4.0, 1e-6);
  EXPECT_EQ(seq.grad().shape(), (Shape{batch, steps, vocab}));
  EXPECT_EQ(seq.grad().to_vector(), ce.grad().to_vector());
  EXPECT_EQ(seq.count(sequence_labels(batch, steps, ids)), 4);
  EXPECT_NEAR(seq.forward(ctx, Tensor::from_host({batch, steps, vocab}, values),
                          sequence_labels(batch, steps, ids)),
              mean, 1e-12);
}

TEST(SequenceCrossEntropyLoss, GradientOfTheMeanMatchesFiniteDifferences) {
  Context ctx = cpu();
  const std::int64_t batch = 2, steps = 4, vocab = 6;
  Tensor logits =
      Tensor::from_host({batch, steps, vocab}, random_values(batch * steps * vocab, 42, -3, 3));
  const Tensor lab = sequence_labels(batch, steps, {1, 5, -100, 0, -100, -100, 3, 3});
  SequenceCrossEntropyLoss seq;
  seq.forward_backward(ctx, logits, lab);
  SequenceCrossEntropyLoss eval;
  expect_gradient_matches(logits, seq.grad().to_vector(), 1.0f,
                          [&](const Tensor& x) { return eval.forward(ctx, x, lab); });
}

// torch gives NaN (0/0) here; noeira gives 0 and a zero gradient.
TEST(SequenceCrossEntropyLoss, AllIgnoredGivesZeroAndNoGradient) {
  Context ctx = cpu();
  const Tensor logits = Tensor::from_host({1, 3, 4}, random_values(12, 43, -2.0f, 2.0f));
  const Tensor lab = sequence_labels(1, 3, {7, 7, 7});
  SequenceCrossEntropyLoss seq(SequenceCrossEntropyOptions{.ignore_index = 7});
  EXPECT_EQ(seq.forward_backward(ctx, logits, lab), 0.0);
  for (float g : seq.grad().to_vector()) EXPECT_EQ(g, 0.0f);
  EXPECT_EQ(seq.forward(ctx, logits, lab), 0.0);
  EXPECT_EQ(seq.count(lab), 0);
  Tensor sum({1}, ctx.target, DType::F64);
  seq.forward_backward(ctx, logits, lab, 0, sum.as<double>());
  EXPECT_EQ(sum.to_host<double>()[0], 0.0);
  for (float g : seq.grad().to_vector()) EXPECT_EQ(g, 0.0f);
}

// Distributed: each rank adds its sum and divides its gradient by the global count.
TEST(SequenceCrossEntropyLoss, ExplicitCountScalesTheGradientAndAddsTheSum) {
  Context ctx = cpu();
  const Tensor logits = Tensor::from_host({2, 2, 3}, random_values(12, 44, -2.0f, 2.0f));
  const Tensor lab = sequence_labels(2, 2, {0, 2, -100, 1});
  SequenceCrossEntropyLoss seq;
  const double mean = seq.forward_backward(ctx, logits, lab);
  const std::vector<float> local = seq.grad().to_vector();
  const std::vector<double> start = {0.5};
  Tensor sum = Tensor::from_host_as<double>({1}, start, ctx.target);
  seq.forward_backward(ctx, logits, lab, 6, sum.as<double>());  // 3 here, 3 on another rank
  EXPECT_NEAR(sum.to_host<double>()[0], 0.5 + 3.0 * mean, 1e-6);
  const std::vector<float> global = seq.grad().to_vector();
  for (std::size_t i = 0; i < local.size(); ++i) EXPECT_NEAR(global[i], 0.5f * local[i], 1e-7);
  seq.forward(ctx, logits, lab, sum.as<double>());
  EXPECT_NEAR(sum.to_host<double>()[0], 0.5 + 6.0 * mean, 1e-6);
  EXPECT_EQ(seq.grad().to_vector(), global);  // forward leaves the gradient alone
}

TEST(SequenceCrossEntropyLoss, BadShapesAndLabelsAreNamed) {
  Context ctx = cpu();
  SequenceCrossEntropyLoss seq;
  const Tensor logits = Tensor::from_host({2, 3, 4}, std::vector<float>(24));
  const Tensor flat_logits = matrix(6, 4, std::vector<float>(24));
  const Tensor zeros = sequence_labels(2, 3, {0, 0, 0, 0, 0, 0});
  expect_input_error(
      [&] { seq.forward(ctx, flat_logits, zeros); },
      {"SequenceCrossEntropyLoss", "logits must be a non-empty [batch, steps, vocab] f32",
       "[6, 4]"});
  expect_input_error([&] { seq.forward(ctx, logits, labels({0, 0, 0, 0, 0, 0})); },
                     {"SequenceCrossEntropyLoss", "labels must be [2, 3] i32", "[6]"});
  const Tensor float_labels = Tensor::from_host({2, 3}, std::vector<float>(6));
  expect_input_error([&] { seq.forward(ctx, logits, float_labels); },
                     {"SequenceCrossEntropyLoss", "labels must be [2, 3] i32"});
  expect_input_error(
      [&] { seq.forward(ctx, logits, sequence_labels(2, 3, {0, -100, 3, 1, 4, 0})); },
      {"SequenceCrossEntropyLoss", "label 4 at batch 1, step 1 is outside [0, 4)"});
  // -1 is a bad label, not padding, under the default ignore index.
  expect_input_error(
      [&] { seq.forward_backward(ctx, logits, sequence_labels(2, 3, {-1, 0, 0, 0, 0, 0})); },
      {"SequenceCrossEntropyLoss", "label -1 at batch 0, step 0"});
}

// --- the loss sum on the target ----------------------------------------------------------------

// forward_backward and forward ADD to a double in the target's memory; the host-returning calls
// give exactly what was added.
void expect_sum_added(RowLoss& loss, const Tensor& pred, const Tensor& target) {
  Context ctx = cpu();
  const std::vector<double> start = {1.5};
  Tensor acc = Tensor::from_host_as<double>({1}, start, ctx.target);
  const double s = loss.forward_backward(ctx, pred, target, 0.5f);
  const std::vector<float> grad = loss.grad().to_vector();
  loss.forward_backward(ctx, pred, target, 0.5f, acc.as<double>());
  EXPECT_EQ(loss.grad().to_vector(), grad);
  loss.forward(ctx, pred, target, acc.as<double>());
  EXPECT_EQ(acc.to_host<double>()[0], (1.5 + s) + s);
  EXPECT_EQ(loss.forward(ctx, pred, target), s);
}

TEST(RowLoss, AddsTheSumIntoADoubleOnTheTarget) {
  const Tensor x = matrix(3, 4, random_values(12, 21, -2.0f, 2.0f));
  const Tensor y = matrix(3, 4, random_values(12, 22, 0.0f, 0.5f));
  CrossEntropyLoss ce;
  SoftCrossEntropyLoss sce;
  MSELoss mse;
  {
    SCOPED_TRACE("cross-entropy");
    expect_sum_added(ce, x, labels({0, 3, 1}));
  }
  {
    SCOPED_TRACE("soft cross-entropy");
    expect_sum_added(sce, x, y);
  }
  {
    SCOPED_TRACE("mse");
    expect_sum_added(mse, x, y);
  }
  {
    SCOPED_TRACE("two-hot");
    TwoHotLoss two_hot(-1.0f, 1.0f);
    expect_sum_added(two_hot, x, scalars({-0.3f, 0.9f, 2.0f}));
  }
  {
    SCOPED_TRACE("gaussian nll");
    GaussianNLLLoss nll;
    expect_sum_added(nll, y, matrix(3, 2, random_values(6, 23)));
  }
}

// --- accuracy --------------------------------------------------------------------------------

TEST(CountCorrect, CountsArgMaxHitsWithFirstMaxOnTies) {
  Context ctx = cpu();
  const Tensor logits = matrix(4, 3, {
                                         0, 5, 1,   // arg-max 1
                                         2, 2, 0,   // tie: 0
                                         -1, -3, -2,  // 0
                                         0, 0, 9,   // 2
                                     });
  EXPECT_EQ(count_correct(ctx, logits, labels({1, 0, 0, 2})), 4);
  EXPECT_EQ(count_correct(ctx, logits, labels({1, 1, 2, 2})), 2);  // the tie does not go to 1
  EXPECT_EQ(count_correct(ctx, logits, labels({0, 2, 1, 0})), 0);
  EXPECT_THROW(count_correct(ctx, logits, labels({0, 3, 1, 0})), InputError);
}

}  // namespace
}  // namespace noeira
