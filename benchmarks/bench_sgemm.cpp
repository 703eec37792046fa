// Matrix product throughput at the shapes one training step of the `mlp` preset runs (batch 100,
// 784-256-128-10), and at 1024^3 for the machine's peak: OpenBLAS's sgemm (the machine's sgemm
// rate every benchmark quotes) beside noeira's fp32 product (kernels/cpu/gemm.hpp: oneDNN's
// matmul unless built with -DNOEIRA_CPU_PRODUCTS=openblas), the library the training runs on.
// benchmarks/compare_pytorch.sh turns these rates into the GEMM-bound limit of an epoch. At
// 1024^3 also the two ways to bf16 products (--precision bf16, benchmarks/mixed_precision.sh):
// noeira's (kernels/cpu/gemm.hpp: operands converted to bf16, oneDNN's bf16 matmul), and rounding
// the operands to bfloat16 values held in fp32 around OpenBLAS's sgemm, which Debian's OpenBLAS
// (no sbgemm) would leave.
//
// Each benchmark reports GFLOP/s (2·M·N·K per call) in the "gflops" counter; run with
// --benchmark_format=json for the script. Threads: OPENBLAS_NUM_THREADS / --threads as usual
// (Google Benchmark passes unknown flags through, so use the environment).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/bf16_math.hpp"
#include "kernels/cpu/blas_core.hpp"
#include "kernels/cpu/gemm.hpp"

namespace {

struct Shape {
  CBLAS_TRANSPOSE ta, tb;
  int m, n, k;
};

// The GEMMs of one training step of the mlp preset at batch B (see kernels/cpu/linear.cpp):
// forward y = x·wᵀ; backward dw = gᵀ·x, dx = g·w (none for the first layer: InputGrad::Skip).
constexpr int B = 100;
const Shape kStep[] = {
    {CblasNoTrans, CblasTrans, B, 256, 784},  // fwd 0
    {CblasNoTrans, CblasTrans, B, 128, 256},  // fwd 1
    {CblasNoTrans, CblasTrans, B, 10, 128},   // fwd 2
    {CblasTrans, CblasNoTrans, 10, 128, B},   // dw 2
    {CblasNoTrans, CblasNoTrans, B, 128, 10}, // dx 2
    {CblasTrans, CblasNoTrans, 128, 256, B},  // dw 1
    {CblasNoTrans, CblasNoTrans, B, 256, 128},// dx 1
    {CblasTrans, CblasNoTrans, 256, 784, B},  // dw 0
};

struct Operands {
  std::vector<float> a, b, c;
  explicit Operands(const Shape& s)
      : a(static_cast<std::size_t>(s.m) * s.k), b(static_cast<std::size_t>(s.k) * s.n),
        c(static_cast<std::size_t>(s.m) * s.n) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 7) * 0.02f - 0.06f;
  }
};

// OpenBLAS's sgemm, or noeira's product (kernels/cpu/gemm.hpp) at fp32 or bf16.
enum class Library { OpenBlas, Noeira, NoeiraBf16 };

void run(const Shape& s, Operands& o, Library library = Library::OpenBlas) {
  // Row-major leading dimensions of op(A) [m,k] and op(B) [k,n] as stored.
  const int lda = s.ta == CblasNoTrans ? s.k : s.m;
  const int ldb = s.tb == CblasNoTrans ? s.n : s.k;
  if (library != Library::OpenBlas) {
    const auto precision =
        library == Library::NoeiraBf16 ? noeira::Precision::Bf16 : noeira::Precision::Fp32;
    noeira::cpu::gemm(precision, s.ta == CblasTrans, s.tb == CblasTrans, s.m, s.n,
                      s.k, 1.0f, o.a.data(), lda, o.b.data(), ldb, 0.0f, o.c.data(), s.n);
    return;
  }
  cblas_sgemm(CblasRowMajor, s.ta, s.tb, s.m, s.n, s.k, 1.0f, o.a.data(), lda, o.b.data(), ldb,
              0.0f, o.c.data(), s.n);
}

void set_counters(benchmark::State& state, double flop_per_iter) {
  state.counters["gflops"] = benchmark::Counter(flop_per_iter * 1e-9 * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
  state.counters["flop_per_iter"] = flop_per_iter;
}

void BM_MlpGemm(benchmark::State& state, Library library) {
  const Shape& s = kStep[state.range(0)];
  Operands o(s);
  for (auto _ : state) {
    run(s, o, library);
    benchmark::DoNotOptimize(o.c.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, 2.0 * s.m * s.n * s.k);
  state.SetLabel(std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k));
}
BENCHMARK_CAPTURE(BM_MlpGemm, sgemm, Library::OpenBlas)
    ->DenseRange(0, 7)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_MlpGemm, products, Library::Noeira)
    ->DenseRange(0, 7)->Unit(benchmark::kMicrosecond)->UseRealTime();

// All GEMMs of one step back to back: the step's GEMM time, and its flop-weighted rate.
// BM_MlpStepGemms through OpenBLAS, BM_MlpStepProducts through noeira's products.
void mlp_step(benchmark::State& state, Library library) {
  std::vector<Operands> ops;
  double flop = 0.0;
  for (const Shape& s : kStep) {
    ops.emplace_back(s);
    flop += 2.0 * s.m * s.n * s.k;
  }
  for (auto _ : state) {
    for (std::size_t i = 0; i < std::size(kStep); ++i) run(kStep[i], ops[i], library);
    benchmark::ClobberMemory();
  }
  set_counters(state, flop);
}
void BM_MlpStepGemms(benchmark::State& state) { mlp_step(state, Library::OpenBlas); }
void BM_MlpStepProducts(benchmark::State& state) { mlp_step(state, Library::Noeira); }
BENCHMARK(BM_MlpStepGemms)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_MlpStepProducts)->Unit(benchmark::kMicrosecond)->UseRealTime();

void product_1024(benchmark::State& state, Library library) {
  const Shape s{CblasNoTrans, CblasNoTrans, 1024, 1024, 1024};
  Operands o(s);
  for (auto _ : state) {
    run(s, o, library);
    benchmark::ClobberMemory();
  }
  set_counters(state, 2.0 * 1024 * 1024 * 1024);
}
void BM_Sgemm1024(benchmark::State& state) { product_1024(state, Library::OpenBlas); }
void BM_Fp32Product1024(benchmark::State& state) { product_1024(state, Library::Noeira); }
void BM_Bf16Gemm1024(benchmark::State& state) { product_1024(state, Library::NoeiraBf16); }
BENCHMARK(BM_Sgemm1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Fp32Product1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Bf16Gemm1024)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_RoundedSgemm1024(benchmark::State& state) {
  const Shape s{CblasNoTrans, CblasNoTrans, 1024, 1024, 1024};
  Operands o(s);
  std::vector<float> a(o.a.size()), b(o.b.size());
  for (auto _ : state) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = noeira::round_to_bf16(o.a[i]);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = noeira::round_to_bf16(o.b[i]);
    cblas_sgemm(CblasRowMajor, s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n,
                0.0f, o.c.data(), s.n);
    benchmark::ClobberMemory();
  }
  set_counters(state, 2.0 * 1024 * 1024 * 1024);
}
BENCHMARK(BM_RoundedSgemm1024)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

// The rate of the kernels noeira trains with: on a CPU OpenBLAS does not know, the same
// OPENBLAS_CORETYPE noeira starts again with (kernels/cpu/blas_core.hpp), named in the context.
int main(int argc, char** argv) {
  noeira::cpu::reexec_with_blas_core(argv);
  benchmark::AddCustomContext("openblas_core", noeira::cpu::blas_core());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
