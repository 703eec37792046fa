// Convolution throughput on the CPU: resnet20's 3x3 layers (CIFAR-10, batch 128) through the
// kernel table (oneDNN's direct convolutions), forward, backward data and backward filter, beside
// OpenBLAS sgemm on the layer's whole im2col product (the bound of a GEMM-based convolution).
//
// Each benchmark reports GFLOP/s (2·N·Co·Ho·Wo·Ci·k·k per direction) in the "gflops" counter.
// Threads: OMP_NUM_THREADS (the comparison with PyTorch runs at 2).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/blas_core.hpp"
#include "kernels/kernel_table.hpp"

namespace {

using noeira::ConvGeometry;

constexpr std::int64_t kBatch = 128;

// {channels in, size, channels out, stride}: resnet20's three stages and a downsampling layer.
struct Layer {
  std::int64_t in_channels, size, out_channels, stride;
};
constexpr Layer kLayers[] = {{16, 32, 16, 1}, {32, 16, 32, 1}, {64, 8, 64, 1}, {16, 32, 32, 2}};

ConvGeometry geometry(const Layer& l) {
  const std::int64_t out = (l.size + 2 - 3) / l.stride + 1;
  return ConvGeometry{.images = kBatch, .in_channels = l.in_channels, .in_height = l.size,
                      .in_width = l.size, .out_channels = l.out_channels, .out_height = out,
                      .out_width = out, .kernel = 3, .stride = l.stride, .padding = 1};
}

double flops(const ConvGeometry& g) {
  return 2.0 * static_cast<double>(g.images * g.out_channels * g.out_height * g.out_width *
                                   g.in_channels * g.kernel * g.kernel);
}

enum class Direction { Forward, BackwardData, BackwardFilter, All };

void BM_Conv(benchmark::State& state) {
  const ConvGeometry g = geometry(kLayers[state.range(0)]);
  const auto direction = static_cast<Direction>(state.range(1));
  const noeira::KernelTable& k = noeira::kernels_for(noeira::Target::Cpu);
  std::vector<float> x(g.images * g.in_channels * g.in_height * g.in_width, 0.5f);
  std::vector<float> y(g.images * g.out_channels * g.out_height * g.out_width, 0.25f);
  std::vector<float> w(g.out_channels * g.in_channels * g.kernel * g.kernel, 0.125f);
  std::vector<float> dw(w.size()), dx(x.size());
  std::vector<float> workspace(k.conv2d_workspace(g));
  for (auto _ : state) {
    if (direction == Direction::Forward || direction == Direction::All) {
      k.conv2d_forward(nullptr, y.data(), x.data(), w.data(), nullptr, g, workspace.data());
    }
    if (direction == Direction::BackwardFilter || direction == Direction::All) {
      k.conv2d_backward_filter(nullptr, noeira::GradMode::Overwrite, dw.data(), y.data(),
                               x.data(), g, workspace.data());
    }
    if (direction == Direction::BackwardData || direction == Direction::All) {
      k.conv2d_backward_data(nullptr, dx.data(), y.data(), w.data(), nullptr, g,
                             workspace.data());
    }
    benchmark::ClobberMemory();
  }
  const double per_iteration = flops(g) * (direction == Direction::All ? 3.0 : 1.0);
  state.counters["gflops"] = benchmark::Counter(per_iteration * 1e-9 * state.iterations(),
                                                benchmark::Counter::kIsRate);
}

// The forward GEMM of the whole batch as one sgemm, w [Co, Ci·k·k] · columns [Ci·k·k, N·Ho·Wo]:
// the rate an im2col convolution's products could reach at best, without the im2col itself.
void BM_SgemmOfLayer(benchmark::State& state) {
  const ConvGeometry g = geometry(kLayers[state.range(0)]);
  const int m = static_cast<int>(g.out_channels);
  const int n = static_cast<int>(g.images * g.out_height * g.out_width);
  const int kk = static_cast<int>(g.in_channels * g.kernel * g.kernel);
  std::vector<float> a(static_cast<std::size_t>(m) * kk, 0.5f);
  std::vector<float> b(static_cast<std::size_t>(kk) * n, 0.25f), c(static_cast<std::size_t>(m) * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, kk, 1.0f, a.data(), kk,
                b.data(), n, 0.0f, c.data(), n);
    benchmark::ClobberMemory();
  }
  state.counters["gflops"] =
      benchmark::Counter(flops(g) * 1e-9 * state.iterations(), benchmark::Counter::kIsRate);
}

void conv_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"layer", "direction"});
  for (std::int64_t layer = 0; layer < 4; ++layer) {
    for (std::int64_t direction = 0; direction < 4; ++direction) b->Args({layer, direction});
  }
}

BENCHMARK(BM_Conv)->Apply(conv_args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SgemmOfLayer)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

// The kernels noeira trains with: on a CPU OpenBLAS does not know, the same OPENBLAS_CORETYPE
// noeira starts again with (kernels/cpu/blas_core.hpp), named in the context.
int main(int argc, char** argv) {
  noeira::cpu::reexec_with_blas_core(argv);
  benchmark::AddCustomContext("openblas_core", noeira::cpu::blas_core());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
