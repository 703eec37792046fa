// The element-wise loops and the row kernels at every vector width the CPU has
// (kernels/cpu/vector_isa.hpp): the AVX2 and AVX-512 copies give the same bits as the SSE2 one;
// and GELU's tanh form, computed through the vectorizable exponential, against float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gradcheck.hpp"
#include "kernels/activation_math.hpp"
#include "kernels/cpu/vector_isa.hpp"
#include "kernels/kernel_table.hpp"

namespace noeira {
namespace {

using cpu::VectorIsa;
using testing::random_values;

const KernelTable& kernels() { return kernels_for(Target::Cpu); }

std::string isa_name(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::Sse2: return "sse2";
    case VectorIsa::Avx2: return "avx2";
    case VectorIsa::Avx512: return "avx512";
  }
  return "?";
}

// Restores the detected width when a test ends.
struct IsaGuard {
  ~IsaGuard() { cpu::set_vector_isa(cpu::best_vector_isa()); }
};

std::vector<VectorIsa> available_isas() {
  std::vector<VectorIsa> out;
  for (VectorIsa isa : {VectorIsa::Sse2, VectorIsa::Avx2, VectorIsa::Avx512}) {
    if (static_cast<int>(isa) <= static_cast<int>(cpu::best_vector_isa())) out.push_back(isa);
  }
  return out;
}

// Everything a LinearAct forward + backward writes, at one vector width.
std::vector<float> linear_outputs(Activation act, std::int64_t rows, std::int64_t in,
                                  std::int64_t out) {
  const std::vector<float> x = random_values(static_cast<std::size_t>(rows * in), 1, -4.0f, 4.0f);
  const std::vector<float> w = random_values(static_cast<std::size_t>(out * in), 2, -1.0f, 1.0f);
  const std::vector<float> b = random_values(static_cast<std::size_t>(out), 3);
  const std::vector<float> dy = random_values(static_cast<std::size_t>(rows * out), 4);
  std::vector<float> y(static_cast<std::size_t>(rows * out)), pre(y.size()), dpre(y.size());
  std::vector<float> dx(x.size()), dw(w.size()), db(b.size());
  const KernelTable& k = kernels();
  k.linear_forward(nullptr, act, y.data(), pre.data(), x.data(), w.data(), b.data(), rows, in,
                   out);
  k.linear_backward(nullptr, act, GradMode::Overwrite, dx.data(), dw.data(), db.data(),
                    dpre.data(), dy.data(), x.data(), w.data(), y.data(), pre.data(), rows, in,
                    out);
  std::vector<float> all;
  for (const std::vector<float>* v : {&y, &pre, &dpre, &dx, &dw, &db}) {
    all.insert(all.end(), v->begin(), v->end());
  }
  // The stand-alone activation kernels over the same pre-activations.
  std::vector<float> ya(pre.size()), dxa(pre.size());
  k.activation_forward(nullptr, act, ya.data(), pre.data(), static_cast<std::int64_t>(pre.size()));
  k.activation_backward(nullptr, act, dxa.data(), dy.data(), pre.data(), ya.data(),
                        static_cast<std::int64_t>(pre.size()));
  all.insert(all.end(), ya.begin(), ya.end());
  all.insert(all.end(), dxa.begin(), dxa.end());
  return all;
}

TEST(VectorIsa, EveryWidthGivesTheBitsOfSse2) {
  IsaGuard guard;
  // Rows of 67 and 520 columns: vector bodies and scalar tails at every width; 300 x 520 is past
  // the parallel grain, so the threads split the flat activation loops too.
  for (Activation act : {Activation::Identity, Activation::ReLU, Activation::GeluTanh,
                         Activation::Sigmoid, Activation::SiLU, Activation::Tanh}) {
    for (std::int64_t out : {67, 520}) {
      cpu::set_vector_isa(VectorIsa::Sse2);
      const std::vector<float> ref = linear_outputs(act, 300, 24, out);
      for (VectorIsa isa : available_isas()) {
        SCOPED_TRACE(std::string(to_string(act)) + " out " + std::to_string(out) + " " + isa_name(isa));
        cpu::set_vector_isa(isa);
        const std::vector<float> got = linear_outputs(act, 300, 24, out);
        ASSERT_EQ(got.size(), ref.size());
        std::size_t differ = 0;
        for (std::size_t i = 0; i < ref.size(); ++i) {
          std::uint32_t a, b;
          std::memcpy(&a, &ref[i], 4);
          std::memcpy(&b, &got[i], 4);
          differ += a != b;
        }
        EXPECT_EQ(differ, 0u);
      }
    }
  }
}

// Three Adam steps (Adam and AdamW) over a buffer past the parallel grain with a scalar tail:
// weights and both moments, at every width, are the SSE2 copy's bits.
TEST(VectorIsa, AdamStepsAtEveryWidthGiveTheBitsOfSse2) {
  IsaGuard guard;
  const std::int64_t n = (1 << 15) + 13;
  auto steps = [n](bool decoupled) {
    std::vector<float> w = random_values(static_cast<std::size_t>(n), 5, -1.0f, 1.0f);
    std::vector<float> m(w.size(), 0.0f), v(w.size(), 0.0f);
    for (int t = 1; t <= 3; ++t) {
      const std::vector<float> g =
          random_values(static_cast<std::size_t>(n), 6 + static_cast<std::uint32_t>(t));
      AdamHyper h;
      h.lr = 0.01f;
      h.weight_decay = 0.1f;
      h.decoupled = decoupled;
      h.bias_correction1 = 1.0f - std::pow(h.beta1, static_cast<float>(t));
      h.bias_correction2 = 1.0f - std::pow(h.beta2, static_cast<float>(t));
      kernels().adam_step(nullptr, w.data(), m.data(), v.data(), g.data(), n, h);
    }
    w.insert(w.end(), m.begin(), m.end());
    w.insert(w.end(), v.begin(), v.end());
    return w;
  };
  for (bool decoupled : {false, true}) {
    cpu::set_vector_isa(VectorIsa::Sse2);
    const std::vector<float> ref = steps(decoupled);
    for (VectorIsa isa : available_isas()) {
      SCOPED_TRACE(std::string(decoupled ? "AdamW " : "Adam ") + isa_name(isa));
      cpu::set_vector_isa(isa);
      const std::vector<float> got = steps(decoupled);
      ASSERT_EQ(got.size(), ref.size());
      EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0);
    }
  }
}

// One BatchNorm step's kernels (moments, statistics, forward, gradient sums, backward) on planes
// of 27 pixels (three whole lanes of 8 and a tail) past the parallel grain: every sum, output and
// gradient at every width is the SSE2 copy's bits.
TEST(VectorIsa, BatchNormAtEveryWidthGivesTheBitsOfSse2) {
  IsaGuard guard;
  const std::int64_t rows = 37, channels = 13, pixels = 75, n = rows * channels * pixels;
  const std::vector<float> x = random_values(static_cast<std::size_t>(n), 11, -3.0f, 5.0f);
  const std::vector<float> dy = random_values(static_cast<std::size_t>(n), 12);
  const std::vector<float> gamma = random_values(static_cast<std::size_t>(channels), 13);
  const std::vector<float> beta = random_values(static_cast<std::size_t>(channels), 14);
  auto step = [&] {
    const KernelTable& k = kernels();
    std::vector<double> moments(2 * channels + 1), sums(2 * channels);
    std::vector<float> mean(channels), rstd(channels), running_mean(channels, 0.0f),
        running_var(channels, 1.0f), tracked(1, 0.0f);
    std::vector<float> y(x.size()), dx(x.size()), dgamma(channels), dbeta(channels);
    k.batchnorm_moments(nullptr, moments.data(), x.data(), true, rows, channels, pixels);
    k.batchnorm_statistics(nullptr, BatchNormSource::Batch, mean.data(), rstd.data(),
                           running_mean.data(), running_var.data(), tracked.data(),
                           moments.data(), channels, 1e-5f, 0.1f, true);
    k.batchnorm_forward(nullptr, y.data(), x.data(), mean.data(), rstd.data(), gamma.data(),
                        beta.data(), rows, channels, pixels);
    k.batchnorm_grad_sums(nullptr, sums.data(), dy.data(), x.data(), mean.data(), rstd.data(),
                          rows, channels, pixels);
    k.batchnorm_backward(nullptr, GradMode::Overwrite, dx.data(), dgamma.data(), dbeta.data(),
                         sums.data(), sums.data(), moments.data(), dy.data(), x.data(),
                         mean.data(), rstd.data(), gamma.data(), rows, channels, pixels);
    std::vector<float> out = y;
    out.insert(out.end(), dx.begin(), dx.end());
    out.insert(out.end(), dgamma.begin(), dgamma.end());
    out.insert(out.end(), dbeta.begin(), dbeta.end());
    out.insert(out.end(), running_var.begin(), running_var.end());
    return std::pair{out, std::vector<double>(moments.begin(), moments.end() - 1)};
  };
  cpu::set_vector_isa(VectorIsa::Sse2);
  const auto [ref, ref_moments] = step();
  for (VectorIsa isa : available_isas()) {
    SCOPED_TRACE(isa_name(isa));
    cpu::set_vector_isa(isa);
    const auto [got, got_moments] = step();
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(got_moments.data(), ref_moments.data(),
                          got_moments.size() * sizeof(double)), 0);
  }
}

// The row kernels whose sums run in fixed lanes and whose exponential is plain arithmetic
// (LayerNorm and RMSNorm, softmax plain and masked and its backward, the softmax losses, the
// chunked sums): at every width the SSE2 copy's bits. Rows of 75 columns (two whole lanes of 32
// and a tail of 11), 300 of them: past the parallel grain.
std::vector<float> row_kernel_outputs() {
  const std::int64_t rows = 300, cols = 75, n = rows * cols;
  const KernelTable& k = kernels();
  std::vector<float> x = random_values(static_cast<std::size_t>(n), 21, -6.0f, 9.0f);
  x[0] = -INFINITY;  // softmax: exactly 0
  const std::vector<float> dy = random_values(static_cast<std::size_t>(n), 22);
  const std::vector<float> gamma = random_values(static_cast<std::size_t>(cols), 23);
  const std::vector<float> beta = random_values(static_cast<std::size_t>(cols), 24);
  const std::vector<float> finite(x.begin() + 1, x.end());  // the norms and losses: finite rows
  std::vector<float> out;
  auto keep = [&out](const std::vector<float>& v) { out.insert(out.end(), v.begin(), v.end()); };
  for (bool centred : {true, false}) {  // LayerNorm, RMSNorm
    std::vector<float> y(x.size()), mean(rows), rstd(rows), dx(x.size()), dg(cols), db(cols);
    k.norm_forward(nullptr, y.data(), centred ? mean.data() : nullptr, rstd.data(),
                   finite.data(), gamma.data(), centred ? beta.data() : nullptr, rows - 1, cols,
                   1e-5f);
    k.norm_backward(nullptr, GradMode::Overwrite, dx.data(), dg.data(),
                    centred ? db.data() : nullptr, dy.data(), finite.data(), gamma.data(),
                    centred ? mean.data() : nullptr, rstd.data(), rows - 1, cols);
    for (const std::vector<float>* v : {&y, &mean, &rstd, &dx, &dg, &db}) keep(*v);
  }
  std::vector<float> p(x.size()), pm(x.size()), dx(x.size());
  k.softmax_forward(nullptr, p.data(), x.data(), rows, cols);
  EXPECT_EQ(p[0], 0.0f) << "softmax of -inf";
  AttentionMask causal;
  causal.causal = true;
  k.masked_softmax_forward(nullptr, pm.data(), x.data(), causal, 4, 1, 75, cols);
  k.softmax_backward(nullptr, dx.data(), dy.data(), p.data(), rows, cols);
  keep(p);
  keep(pm);
  keep(dx);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) labels[static_cast<std::size_t>(r)] = r % cols;
  std::vector<float> targets = random_values(static_cast<std::size_t>(n), 25, 0.0f, 1.0f);
  for (LossKind kind : {LossKind::CrossEntropy, LossKind::SoftCrossEntropy}) {
    std::vector<float> loss(rows - 1), grad(finite.size());
    RowLossArgs a;
    a.row_loss = loss.data();
    a.grad = grad.data();
    a.pred = finite.data();
    a.target = targets.data();
    a.labels = labels.data();
    a.rows = rows - 1;
    a.cols = cols;
    a.grad_scale = 0.5f;
    k.row_loss(nullptr, kind, a);
    keep(loss);
    keep(grad);
  }
  const std::int64_t long_n = 3 * 8192 + 77;
  const std::vector<float> v = random_values(static_cast<std::size_t>(long_n), 26);
  const double sums[] = {k.sum(nullptr, v.data(), long_n),
                         k.sum_squares(nullptr, v.data(), long_n)};
  for (double s : sums) {
    float halves[2];
    std::memcpy(halves, &s, sizeof s);
    out.insert(out.end(), halves, halves + 2);  // the double's bits
  }
  return out;
}

TEST(VectorIsa, RowKernelsAtEveryWidthGiveTheBitsOfSse2) {
  IsaGuard guard;
  cpu::set_vector_isa(VectorIsa::Sse2);
  const std::vector<float> ref = row_kernel_outputs();
  for (VectorIsa isa : available_isas()) {
    SCOPED_TRACE(isa_name(isa));
    cpu::set_vector_isa(isa);
    const std::vector<float> got = row_kernel_outputs();
    ASSERT_EQ(got.size(), ref.size());
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0);
  }
}

TEST(VectorIsa, GeluTanhAndItsDerivativeMatchFloat64) {
  double worst_y = 0.0, worst_d = 0.0;
  for (double xd = -30.0; xd <= 30.0; xd += 1.0 / 1024.0) {
    const float x = static_cast<float>(xd);
    const double u = 0.7978845608028654 * (x + 0.044715 * x * x * static_cast<double>(x));
    // 0.5·x·(1 + tanh u) = x·s, s = 1 / (1 + e^(-2u)): in double without 1 + tanh's
    // cancellation, so that the tiny outputs of negative x have a reference too.
    const double s = 1.0 / (1.0 + std::exp(-2.0 * u));
    const double y = x * s;
    const double d = s + 2.0 * x * s * (1.0 - s) * 0.7978845608028654 *
                             (1.0 + 3.0 * 0.044715 * x * static_cast<double>(x));
    const float gy = act::forward(Activation::GeluTanh, x);
    const float gd = act::derivative(Activation::GeluTanh, x, gy);
    // Outputs below 1e-20 (x < -7.8) count absolutely: there the float inner term alone is off
    // by a few 1e-6 relative, and past x = -9.7 the gate is 0 (e^(-2u) > e^80, y < 1e-34).
    worst_y = std::max(worst_y, std::abs(gy - y) / (std::abs(y) + 1e-20));
    worst_d = std::max(worst_d, std::abs(gd - d) / (std::abs(d) + 1e-6));
    if (x < -10.0f) {
      EXPECT_EQ(gy, 0.0f) << x;
    }
  }
  EXPECT_LT(worst_y, 1e-5);
  EXPECT_LT(worst_d, 1e-3);
  EXPECT_TRUE(std::isnan(act::forward(Activation::GeluTanh, NAN)));
}

TEST(VectorIsa, ExponentialIsWithinTwoUlpsAndClamps) {
  double worst = 0.0;
  for (double xd = -87.0; xd <= 88.0; xd += 1.0 / 4096.0) {
    const float x = static_cast<float>(xd);
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(act::exp_vectorizable(x) - ref) / ref);
  }
  EXPECT_LT(worst, 2.0 * 5.96e-8);
  EXPECT_GT(act::exp_vectorizable(INFINITY), 1e38f);
  EXPECT_GT(act::exp_vectorizable(-INFINITY), 0.0f);
  EXPECT_LT(act::exp_vectorizable(-INFINITY), 1.3e-38f);
  EXPECT_TRUE(std::isnan(act::exp_vectorizable(NAN)));
}

}  // namespace
}  // namespace noeira
