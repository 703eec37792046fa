// The optimizer's share of one training step of the `mlp` preset (784-256-128-10: 235,146
// parameters in six tensors), alone: the CPU's Adam (kernels/cpu/optimizer.cpp) called once per
// tensor, as the trainer calls it, beside a stream over the same bytes (read w, m, v and g, write
// w, m and v) that only multiplies and adds: what memory would allow Adam if its square root and
// division cost nothing. benchmarks/compare_pytorch.sh adds Adam's time to the products' for the
// part of an epoch no trimming of the rest can remove. Threads: OMP_NUM_THREADS.
//
// Each benchmark reports the bytes it moves per step in "bytes" and their rate in "gbps".
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/vector_isa.hpp"
#include "kernels/kernel_table.hpp"

namespace {

// The mlp preset's parameters, tensor by tensor (weights [out, in], biases [out]).
constexpr std::int64_t kTensors[] = {256 * 784, 256, 128 * 256, 128, 10 * 128, 10};

// Every tensor's weights, moments and gradient, each array apart (as the trainer's are).
struct MlpState {
  std::vector<std::vector<float>> w, m, v, g;
  MlpState() {
    for (std::int64_t n : kTensors) {
      const auto size = static_cast<std::size_t>(n);
      w.emplace_back(size, 0.01f);
      m.emplace_back(size, 0.0f);
      v.emplace_back(size, 0.0f);
      std::vector<float> grad(size);
      for (std::size_t i = 0; i < size; ++i) grad[i] = static_cast<float>(i % 17) * 1e-3f - 8e-3f;
      g.push_back(std::move(grad));
    }
  }
};

// Four arrays read and three written per parameter.
constexpr double kBytesPerParameter = 7.0 * sizeof(float);

void set_counters(benchmark::State& state) {
  std::int64_t parameters = 0;
  for (std::int64_t n : kTensors) parameters += n;
  const double bytes = kBytesPerParameter * static_cast<double>(parameters);
  state.counters["bytes"] = bytes;
  state.counters["gbps"] = benchmark::Counter(
      bytes * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_MlpAdam(benchmark::State& state) {
  MlpState s;
  const auto& k = noeira::kernels_for(noeira::Target::Cpu, noeira::Precision::Fp32);
  noeira::AdamHyper hyper;
  hyper.bias_correction1 = 0.1f;  // step 1's, so that the update is not a no-op
  hyper.bias_correction2 = 0.001f;
  for (auto _ : state) {
    for (std::size_t t = 0; t < s.w.size(); ++t) {
      k.adam_step(nullptr, s.w[t].data(), s.m[t].data(), s.v[t].data(), s.g[t].data(),
                  static_cast<std::int64_t>(s.w[t].size()), hyper);
    }
    benchmark::ClobberMemory();
  }
  set_counters(state);
}

void BM_MlpStreamOfAdamsBytes(benchmark::State& state) {
  MlpState s;
  for (auto _ : state) {
    for (std::size_t t = 0; t < s.w.size(); ++t) {
      float* w = s.w[t].data();
      float* m = s.m[t].data();
      float* v = s.v[t].data();
      const float* g = s.g[t].data();
      noeira::cpu::parallel_for_chunks(
          static_cast<std::int64_t>(s.w[t].size()), [&](std::int64_t i0, std::int64_t i1) {
            noeira::cpu::with_vector_isa([&] {
              float* __restrict wp = w;
              float* __restrict mp = m;
              float* __restrict vp = v;
              const float* __restrict gp = g;
              for (std::int64_t i = i0; i < i1; ++i) {
                mp[i] = 0.9f * mp[i] + 0.1f * gp[i];
                vp[i] = 0.999f * vp[i] + 0.001f * gp[i] * gp[i];
                wp[i] -= 1e-3f * (mp[i] + vp[i]);
              }
            });
          });
    }
    benchmark::ClobberMemory();
  }
  set_counters(state);
}

BENCHMARK(BM_MlpAdam)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_MlpStreamOfAdamsBytes)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
