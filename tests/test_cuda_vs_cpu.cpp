// The CUDA kernels against the CPU reference: every table entry runs the same inputs through
// kernels_for(Target::Cpu) and kernels_for(Target::Cuda), and the outputs must agree element by
// element within |cuda - cpu| <= tol + |cpu| · eps (llm.c; tests/cuda_compare.hpp). Entries whose
// CUDA version promises bit-identical results (element-wise maps, embedding scatter, dropout)
// are compared exactly. The losses are in tests/test_cuda_losses.cpp. Without a CUDA device (or
// in a build without CUDA) every test is skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_compare.hpp"
#include "gpu_skip.hpp"
#include "gradcheck.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"

namespace noeira {
namespace {

using testing::expect_same_on_both;
using testing::ids_on;
using testing::kElementwise;
using testing::kExact;
using testing::kGeluEpilogue;
using testing::kGemm;
using testing::kReduction;
using testing::on;
using testing::Outputs;
using testing::random_on;
using testing::random_values;
using testing::Tol;

constexpr Activation kAllActivations[] = {Activation::Identity, Activation::ReLU,
                                          Activation::Tanh,     Activation::Sigmoid,
                                          Activation::GeluTanh, Activation::GeluErf,
                                          Activation::SiLU,     Activation::Elu,
                                          Activation::HardSwish, Activation::Mish,
                                          Activation::Softplus};

TEST(CudaVsCpu, RawMemoryRoundTrips) {
  NOEIRA_REQUIRE_GPU();
  const KernelTable& k = kernels_for(Target::Cuda);
  EXPECT_EQ(k.target, Target::Cuda);
  std::vector<std::uint8_t> src(1001);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7 + 3);
  void* a = k.allocate(src.size());
  void* b = k.allocate(src.size());
  k.upload(nullptr, a, src.data(), src.size());
  k.copy(nullptr, b, a, src.size());
  std::vector<std::uint8_t> back(src.size(), 0);
  k.download(nullptr, back.data(), b, back.size());
  k.synchronize(nullptr);
  k.release(a);
  k.release(b);
  EXPECT_EQ(back, src);
  EXPECT_EQ(k.allocate(0), nullptr);
}

TEST(CudaVsCpu, ElementwiseAreBitIdentical) {
  NOEIRA_REQUIRE_GPU();
  expect_same_on_both(
      [](Target t) {
        const KernelTable& k = kernels_for(t);
        const std::int64_t n = 70001;  // odd, and several blocks
        Tensor a = random_on(t, {n}, 1);
        Tensor b = random_on(t, {n}, 2);
        Tensor filled({n}, t);
        k.fill(nullptr, filled.data(), 0.375f, n);
        Tensor scaled = random_on(t, {n}, 3);
        k.scale(nullptr, scaled.data(), -1.7f, n);
        Tensor sum({n}, t);
        k.add(nullptr, sum.data(), a.data(), b.data(), n);
        k.add(nullptr, a.data(), a.data(), b.data(), n);  // y aliases a
        Tensor acc = random_on(t, {n}, 4);
        k.accumulate(nullptr, acc.data(), b.data(), n);
        // Columns 2..6 of a [9, 11] source into columns 1..5 of a [9, 8] destination.
        Tensor src = random_on(t, {9, 11}, 5);
        Tensor over = random_on(t, {9, 8}, 6);
        Tensor accum = random_on(t, {9, 8}, 6);
        k.copy_columns(nullptr, GradMode::Overwrite, over.data() + 1, 8, src.data() + 2, 11, 9, 5);
        k.copy_columns(nullptr, GradMode::Accumulate, accum.data() + 1, 8, src.data() + 2, 11, 9,
                       5);
        // bf16 round trips (--reduce-dtype bf16): rounded into bits, widened back, and added.
        Tensor bits({(n + 1) / 2}, t);
        auto* b16 = reinterpret_cast<std::uint16_t*>(bits.data());
        k.to_bf16(nullptr, b16, b.data(), n);
        Tensor widened({n}, t);
        k.from_bf16(nullptr, GradMode::Overwrite, widened.data(), b16, n);
        Tensor widened_acc = random_on(t, {n}, 7);
        k.from_bf16(nullptr, GradMode::Accumulate, widened_acc.data(), b16, n);
        return Outputs{{"fill", filled.to_vector()},       {"scale", scaled.to_vector()},
                       {"bf16 round trip", widened.to_vector()},
                       {"bf16 widened +=", widened_acc.to_vector()},
                       {"add", sum.to_vector()},           {"add aliased", a.to_vector()},
                       {"accumulate", acc.to_vector()},    {"copy_columns =", over.to_vector()},
                       {"copy_columns +=", accum.to_vector()}};
      },
      kExact);
}

TEST(CudaVsCpu, ReductionsMatchAndAreDeterministic) {
  NOEIRA_REQUIRE_GPU();
  const KernelTable& cpu = kernels_for(Target::Cpu);
  const KernelTable& gpu = kernels_for(Target::Cuda);
  for (std::int64_t n : {1, 1000, 8192, 8193, 1000003}) {
    const std::vector<float> v = random_values(static_cast<std::size_t>(n), 9, -2.0f, 3.0f);
    const Tensor hc = on(Target::Cpu, {n}, v);
    const Tensor dc = on(Target::Cuda, {n}, v);
    const double s_ref = cpu.sum(nullptr, hc.data(), n);
    const double q_ref = cpu.sum_squares(nullptr, hc.data(), n);
    const double s = gpu.sum(nullptr, dc.data(), n);
    const double q = gpu.sum_squares(nullptr, dc.data(), n);
    // Both sum in double: only the order differs.
    EXPECT_NEAR(s, s_ref, 1e-9 * (1.0 + q_ref)) << "sum, n = " << n;
    EXPECT_NEAR(q, q_ref, 1e-9 * (1.0 + q_ref)) << "sum_squares, n = " << n;
    EXPECT_EQ(gpu.sum(nullptr, dc.data(), n), s) << "sum not deterministic, n = " << n;
    EXPECT_EQ(gpu.sum_squares(nullptr, dc.data(), n), q) << "n = " << n;
    // sum_into adds on the device exactly what sum returns, on top of what is there.
    const std::vector<double> start = {0.5};
    Tensor acc = Tensor::from_host_as<double>({1}, start, Target::Cuda);
    gpu.sum_into(nullptr, acc.as<double>(), dc.data(), n);
    gpu.sum_into(nullptr, acc.as<double>(), dc.data(), n);
    EXPECT_EQ(acc.to_host<double>()[0], (0.5 + s) + s) << "sum_into, n = " << n;
  }
}

TEST(CudaVsCpu, ActivationsForwardAndBackward) {
  NOEIRA_REQUIRE_GPU();
  for (Activation act : kAllActivations) {
    SCOPED_TRACE(std::string(to_string(act)));
    expect_same_on_both([act](Target t) {
      const KernelTable& k = kernels_for(t);
      const std::int64_t n = 4099;
      Tensor x = random_on(t, {n}, 11, -4.0f, 4.0f);
      Tensor dy = random_on(t, {n}, 12);
      Tensor y({n}, t);
      Tensor dx({n}, t);
      k.activation_forward(nullptr, act, y.data(), x.data(), n);
      k.activation_backward(nullptr, act, dx.data(), dy.data(), x.data(), y.data(), n);
      k.activation_backward(nullptr, act, dy.data(), dy.data(), x.data(), y.data(), n);  // alias
      return Outputs{
          {"y", y.to_vector()}, {"dx", dx.to_vector()}, {"dx aliased", dy.to_vector()}};
    });
  }
}

// One forward and two backward passes (Overwrite, then Accumulate on top) of the Linear family.
Outputs run_linear(Target t, Activation act, std::int64_t rows, std::int64_t in, std::int64_t out,
                   bool bias, bool with_dx) {
  const KernelTable& k = kernels_for(t);
  Tensor x = random_on(t, {rows, in}, 21);
  Tensor w = random_on(t, {out, in}, 22, -0.3f, 0.3f);
  Tensor b = random_on(t, {out}, 23);
  Tensor dy = random_on(t, {rows, out}, 24);
  Tensor y({rows, out}, t);
  Tensor pre({rows, out}, t);
  Tensor dpre({rows, out}, t);
  Tensor dx({rows, in}, t);
  Tensor dw = random_on(t, {out, in}, 25);  // Overwrite must not read it
  Tensor db = random_on(t, {out}, 26);
  const float* bp = bias ? b.data() : nullptr;
  float* dbp = bias ? db.data() : nullptr;
  const bool keep_pre = activation_needs_input(act);
  k.linear_forward(nullptr, act, y.data(), keep_pre ? pre.data() : nullptr, x.data(), w.data(),
                   bp, rows, in, out);
  Outputs o{{"y", y.to_vector()}};
  if (keep_pre) o.emplace_back("pre", pre.to_vector());
  const float* prep = keep_pre ? pre.data() : nullptr;
  k.linear_backward(nullptr, act, GradMode::Overwrite, with_dx ? dx.data() : nullptr, dw.data(),
                    dbp, dpre.data(), dy.data(), x.data(), w.data(), y.data(), prep, rows, in,
                    out);
  o.emplace_back("dw", dw.to_vector());
  if (bias) o.emplace_back("db", db.to_vector());
  if (with_dx) o.emplace_back("dx", dx.to_vector());
  k.linear_backward(nullptr, act, GradMode::Accumulate, nullptr, dw.data(), dbp, dpre.data(),
                    dy.data(), x.data(), w.data(), y.data(), prep, rows, in, out);
  o.emplace_back("dw accumulated", dw.to_vector());
  if (bias) o.emplace_back("db accumulated", db.to_vector());
  return o;
}

TEST(CudaVsCpu, LinearFamilyEveryActivation) {
  NOEIRA_REQUIRE_GPU();
  // out = 24 lets GeluTanh use the fused GELU_AUX_BIAS epilogue (aux ld a multiple of 8);
  // out = 5 takes the unfused path; a batch of one row is the degenerate GEMM.
  struct Size {
    std::int64_t rows, in, out;
  };
  for (const Size s : {Size{33, 70, 24}, Size{7, 6, 5}, Size{1, 9, 16}}) {
    for (Activation act : kAllActivations) {
      SCOPED_TRACE(std::string(to_string(act)) + " rows " + std::to_string(s.rows) + " in " +
                   std::to_string(s.in) + " out " + std::to_string(s.out));
      Tol tol = act == Activation::GeluTanh ? kGeluEpilogue : kGemm;
      expect_same_on_both(
          [&](Target t) { return run_linear(t, act, s.rows, s.in, s.out, true, true); }, tol);
    }
  }
}

TEST(CudaVsCpu, LinearWithoutBiasOrInputGradient) {
  NOEIRA_REQUIRE_GPU();
  for (Activation act : {Activation::Identity, Activation::ReLU, Activation::GeluTanh,
                         Activation::SiLU}) {
    SCOPED_TRACE(std::string(to_string(act)));
    Tol tol = act == Activation::GeluTanh ? kGeluEpilogue : kGemm;
    expect_same_on_both([&](Target t) { return run_linear(t, act, 12, 20, 16, false, false); },
                        tol);
  }
}

TEST(CudaVsCpu, SoftmaxForwardAndBackward) {
  NOEIRA_REQUIRE_GPU();
  for (std::int64_t cols : {1, 10, 33, 1000}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    expect_same_on_both(
        [cols](Target t) {
          const KernelTable& k = kernels_for(t);
          const std::int64_t rows = 17;
          Tensor x = random_on(t, {rows, cols}, 31, -8.0f, 8.0f);
          Tensor dy = random_on(t, {rows, cols}, 32);
          Tensor y({rows, cols}, t);
          Tensor dx({rows, cols}, t);
          k.softmax_forward(nullptr, y.data(), x.data(), rows, cols);
          k.softmax_backward(nullptr, dx.data(), dy.data(), y.data(), rows, cols);
          return Outputs{{"y", y.to_vector()}, {"dx", dx.to_vector()}};
        },
        kReduction);
  }
}

TEST(CudaVsCpu, LayerNormForwardAndBackward) {
  NOEIRA_REQUIRE_GPU();
  for (std::int64_t cols : {1, 7, 64, 777}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    expect_same_on_both(
        [cols](Target t) {
          const KernelTable& k = kernels_for(t);
          const std::int64_t rows = 300;  // more than one column-sum chunk of rows
          Tensor x = random_on(t, {rows, cols}, 41, -3.0f, 5.0f);
          Tensor gamma = random_on(t, {cols}, 42, 0.5f, 1.5f);
          Tensor beta = random_on(t, {cols}, 43);
          Tensor dy = random_on(t, {rows, cols}, 44);
          Tensor y({rows, cols}, t);
          Tensor mean({rows}, t);
          Tensor rstd({rows}, t);
          Tensor dx({rows, cols}, t);
          Tensor dgamma = random_on(t, {cols}, 45);
          Tensor dbeta = random_on(t, {cols}, 46);
          k.norm_forward(nullptr, y.data(), mean.data(), rstd.data(), x.data(), gamma.data(),
                         beta.data(), rows, cols, 1e-5f);
          k.norm_backward(nullptr, GradMode::Overwrite, dx.data(), dgamma.data(), dbeta.data(),
                          dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), rows,
                          cols);
          Outputs o{{"y", y.to_vector()},         {"mean", mean.to_vector()},
                    {"rstd", rstd.to_vector()},   {"dx", dx.to_vector()},
                    {"dgamma", dgamma.to_vector()}, {"dbeta", dbeta.to_vector()}};
          k.norm_backward(nullptr, GradMode::Accumulate, dx.data(), dgamma.data(), dbeta.data(),
                          dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), rows,
                          cols);
          o.emplace_back("dgamma accumulated", dgamma.to_vector());
          o.emplace_back("dbeta accumulated", dbeta.to_vector());
          return o;
        },
        kReduction);
  }
}

TEST(CudaVsCpu, RmsNormForwardAndBackward) {
  NOEIRA_REQUIRE_GPU();
  for (std::int64_t cols : {1, 7, 64, 777}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    expect_same_on_both(
        [cols](Target t) {
          const KernelTable& k = kernels_for(t);
          const std::int64_t rows = 300;
          Tensor x = random_on(t, {rows, cols}, 51, -3.0f, 5.0f);
          Tensor gamma = random_on(t, {cols}, 52, 0.5f, 1.5f);
          Tensor dy = random_on(t, {rows, cols}, 54);
          Tensor y({rows, cols}, t);
          Tensor rstd({rows}, t);
          Tensor dx({rows, cols}, t);
          Tensor dgamma = random_on(t, {cols}, 55);
          k.norm_forward(nullptr, y.data(), nullptr, rstd.data(), x.data(), gamma.data(), nullptr,
                         rows, cols, 1e-6f);
          k.norm_backward(nullptr, GradMode::Overwrite, dx.data(), dgamma.data(), nullptr,
                          dy.data(), x.data(), gamma.data(), nullptr, rstd.data(), rows, cols);
          Outputs o{{"y", y.to_vector()},
                    {"rstd", rstd.to_vector()},
                    {"dx", dx.to_vector()},
                    {"dgamma", dgamma.to_vector()}};
          k.norm_backward(nullptr, GradMode::Accumulate, dx.data(), dgamma.data(), nullptr,
                          dy.data(), x.data(), gamma.data(), nullptr, rstd.data(), rows, cols);
          o.emplace_back("dgamma accumulated", dgamma.to_vector());
          return o;
        },
        kReduction);
  }
}

TEST(CudaVsCpu, EmbeddingIsBitIdenticalWithRepeatedIds) {
  NOEIRA_REQUIRE_GPU();
  expect_same_on_both(
      [](Target t) {
        const KernelTable& k = kernels_for(t);
        const std::int64_t vocab = 50, dim = 300;
        // Repeated ids (3 and 7 many times) test the fixed accumulation order.
        std::vector<std::int32_t> id_values;
        for (int i = 0; i < 200; ++i) {
          id_values.push_back(i % 3 == 0 ? 3 : (i % 5 == 0 ? 7 : i % 50));
        }
        const std::int64_t rows = static_cast<std::int64_t>(id_values.size());
        Tensor ids = ids_on(t, id_values);
        Tensor table = random_on(t, {vocab, dim}, 61);
        Tensor dy = random_on(t, {rows, dim}, 62);
        Tensor y({rows, dim}, t);
        Tensor dtable = random_on(t, {vocab, dim}, 63);  // Overwrite must not read it
        k.gather_rows(nullptr, y.data(), ids.ids(), table.data(), rows, dim, vocab);
        k.embedding_backward(nullptr, GradMode::Overwrite, dtable.data(), dy.data(), ids.ids(),
                             rows, dim, vocab);
        // The same gather on int32 rows: words are copied, never converted.
        Tensor int_table = ids_on(t, std::vector<std::int32_t>(
                                         {-1, 0x7f800001, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
        Tensor picked = ids_on(t, {5, 1, 1, 0});
        Tensor int_rows({4, 2}, t, DType::I32);
        k.gather_rows(nullptr, int_rows.ids(), picked.ids(), int_table.ids(), 4, 2, 6);
        // Ids outside the table poison their rows and are skipped by the scatter, on both.
        Tensor bad_ids = ids_on(t, {-1, 2, 50, 7});
        Tensor poisoned({4, dim}, t);
        k.gather_rows(nullptr, poisoned.data(), bad_ids.ids(), table.data(), 4, dim, vocab);
        Tensor dtable_bad = random_on(t, {vocab, dim}, 64);
        k.embedding_backward(nullptr, GradMode::Accumulate, dtable_bad.data(),
                             poisoned.data(), bad_ids.ids(), 4, dim, vocab);
        std::vector<float> int_values;
        for (std::int32_t v : int_rows.to_ids()) int_values.push_back(static_cast<float>(v));
        Outputs o{{"y", y.to_vector()},
                  {"dtable", dtable.to_vector()},
                  {"int rows", int_values},
                  {"dtable with bad ids", dtable_bad.to_vector()}};
        k.embedding_backward(nullptr, GradMode::Accumulate, dtable.data(), dy.data(), ids.ids(),
                             rows, dim, vocab);
        o.emplace_back("dtable accumulated", dtable.to_vector());
        return o;
      },
      kExact);
}

TEST(CudaVsCpu, DropoutMasksAreBitIdentical) {
  NOEIRA_REQUIRE_GPU();
  for (float p : {0.0f, 0.1f, 0.5f, 1.0f}) {
    SCOPED_TRACE("p " + std::to_string(p));
    expect_same_on_both(
        [p](Target t) {
          const KernelTable& k = kernels_for(t);
          const std::int64_t rows = 37, cols = 129;
          const DropoutKey key{1234, 17, 40};
          Tensor x = random_on(t, {rows, cols}, 71);
          Tensor dy = random_on(t, {rows, cols}, 72);
          Tensor y({rows, cols}, t);
          Tensor dx({rows, cols}, t);
          k.dropout_forward(nullptr, y.data(), x.data(), key, p, rows, cols);
          k.dropout_backward(nullptr, dx.data(), dy.data(), key, p, rows, cols);
          k.dropout_forward(nullptr, x.data(), x.data(), key, p, rows, cols);  // y aliases x
          return Outputs{
              {"y", y.to_vector()}, {"dx", dx.to_vector()}, {"y aliased", x.to_vector()}};
        },
        kExact);
  }
}

TEST(CudaVsCpu, DropoutBackwardUsesTheForwardMask) {
  NOEIRA_REQUIRE_GPU();
  // With x = dy = 1, forward gives mask · scale and backward must give the very same values.
  const KernelTable& k = kernels_for(Target::Cuda);
  const std::int64_t rows = 64, cols = 65;
  const DropoutKey key{99, 3, 128};
  const std::vector<float> ones(static_cast<std::size_t>(rows * cols), 1.0f);
  Tensor x = on(Target::Cuda, {rows, cols}, ones);
  Tensor y({rows, cols}, Target::Cuda);
  Tensor dx({rows, cols}, Target::Cuda);
  k.dropout_forward(nullptr, y.data(), x.data(), key, 0.3f, rows, cols);
  k.dropout_backward(nullptr, dx.data(), x.data(), key, 0.3f, rows, cols);
  const std::vector<float> yv = y.to_vector();
  EXPECT_EQ(dx.to_vector(), yv);
  std::size_t dropped = 0;
  for (float v : yv) dropped += v == 0.0f;
  EXPECT_GT(dropped, yv.size() / 5);  // about 30 % dropped: the mask is not all-ones
  EXPECT_LT(dropped, yv.size() * 2 / 5);
}


// The optimizers' updates are the same bits on both: each is one IEEE operation after another
// (kernels/optimizer_math.hpp), nvcc fuses no multiply-add (--fmad=false, as the CPU's
// -ffp-contract=off) and the device's sqrtf and division round correctly by default.
TEST(CudaVsCpu, OptimizerStepsOverSeveralIterations) {
  NOEIRA_REQUIRE_GPU();
  SgdHyper plain;
  plain.lr = 0.1f;
  SgdHyper momentum = plain;
  momentum.momentum = 0.9f;
  momentum.weight_decay = 0.01f;
  SgdHyper nesterov = momentum;
  nesterov.nesterov = true;
  for (const SgdHyper& h : {plain, momentum, nesterov}) {
    SCOPED_TRACE("sgd momentum " + std::to_string(h.momentum) + " nesterov " +
                 std::to_string(h.nesterov));
    expect_same_on_both([h](Target t) {
      const KernelTable& k = kernels_for(t);
      const std::int64_t n = 10007;
      Tensor w = random_on(t, {n}, 101);
      Tensor buf({n}, t);
      for (std::uint32_t step = 0; step < 3; ++step) {
        Tensor g = random_on(t, {n}, 102 + step);
        k.sgd_step(nullptr, w.data(), h.momentum != 0.0f ? buf.data() : nullptr, g.data(), n, h);
      }
      return Outputs{{"w", w.to_vector()}, {"momentum", buf.to_vector()}};
    }, kExact);
  }
  for (bool decoupled : {false, true}) {
    SCOPED_TRACE(decoupled ? "adamw" : "adam");
    expect_same_on_both([decoupled](Target t) {
      const KernelTable& k = kernels_for(t);
      const std::int64_t n = 10007;
      Tensor w = random_on(t, {n}, 111);
      Tensor m({n}, t);
      Tensor v({n}, t);
      AdamHyper h;
      h.lr = 0.01f;
      h.weight_decay = 0.1f;
      h.decoupled = decoupled;
      for (int step = 1; step <= 3; ++step) {
        h.bias_correction1 = 1.0f - std::pow(h.beta1, static_cast<float>(step));
        h.bias_correction2 = 1.0f - std::pow(h.beta2, static_cast<float>(step));
        Tensor g = random_on(t, {n}, 112 + static_cast<std::uint32_t>(step));
        k.adam_step(nullptr, w.data(), m.data(), v.data(), g.data(), n, h);
      }
      return Outputs{{"w", w.to_vector()}, {"m", m.to_vector()}, {"v", v.to_vector()}};
    }, kExact);
  }
}

// A whole network built on each target from the same seed: the initial parameters are equal
// (drawn on the host), so the forward and every gradient must agree within GEMM tolerance.
TEST(CudaModule, SequentialMlpMatchesCpu) {
  NOEIRA_REQUIRE_GPU();
  using Net = Sequential<LinearReLU<13, 32>, LinearGELU<32, 16>, LinearTanh<16, 8>,
                         LinearSiLU<8, 8>, Linear<8, 5>>;
  const InitSpec spec{InitKind::XavierUniform, 0.0f, 0.02f, 2024};
  const std::int64_t rows = 19;
  const std::vector<float> xv = random_values(static_cast<std::size_t>(rows * Net::in_dim), 5);
  const std::vector<float> dyv = random_values(static_cast<std::size_t>(rows * Net::out_dim), 6);
  expect_same_on_both(
      [&](Target t) {
        Net net(Init(t, spec));
        Context ctx = Context::for_target(t);
        const Tensor x = on(t, {rows, Net::in_dim}, xv);
        const Tensor dy = on(t, {rows, Net::out_dim}, dyv);
        Outputs o{{"y", net.forward(ctx, x).to_vector()}};
        o.emplace_back("dx", net.vjp(ctx, dy, InputGrad::Compute).to_vector());
        for_each_param(net, [&](const std::string& name, Param& p) {
          o.emplace_back(name + " (value)", p.val.to_vector());
          o.emplace_back(name + " (grad)", p.grd.to_vector());
        });
        return o;
      },
      Tol{5e-4, 1e-3});
}

}  // namespace
}  // namespace noeira
