#pragma once
// Comparing the CUDA kernels with the CPU reference (llm.c): run the same inputs through both
// targets and compare every output element within |cuda - cpu| <= tol + |cpu| · eps, NaN matching
// NaN. Used by tests/test_cuda_vs_cpu.cpp and tests/test_cuda_losses.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.hpp"
#include "gradcheck.hpp"

namespace noeira::testing {

struct Tol {
  double tol = 1e-6;  // absolute part
  double eps = 1e-5;  // relative part
};
constexpr Tol kExact{0.0, 0.0};
constexpr Tol kElementwise{1e-6, 1e-5};  // device expf/tanhf/erff are within a few ulp
constexpr Tol kGemm{1e-4, 1e-4};         // fp32 sums of ~100 terms in another order
constexpr Tol kReduction{1e-5, 1e-4};
// A Linear whose GELU runs in cuBLASLt's fused epilogue, whose tanh may be the hardware's
// approximation.
constexpr Tol kGeluEpilogue{1e-3, 1e-3};

// Named outputs of one run, downloaded to the host.
using Outputs = std::vector<std::pair<std::string, std::vector<float>>>;

// Runs `run` on both targets and compares every output.
inline void expect_same_on_both(const std::function<Outputs(Target)>& run, Tol tol = kElementwise) {
  const Outputs cpu = run(Target::Cpu);
  const Outputs gpu = run(Target::Cuda);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (std::size_t t = 0; t < cpu.size(); ++t) {
    const auto& [name, ref] = cpu[t];
    const std::vector<float>& got = gpu[t].second;
    ASSERT_EQ(ref.size(), got.size()) << name;
    ASSERT_FALSE(ref.empty()) << name << ": an empty output compares nothing";
    std::size_t bad = 0;
    std::size_t first_bad = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double diff = std::abs(static_cast<double>(got[i]) - ref[i]);
      const bool ok = diff <= tol.tol + std::abs(static_cast<double>(ref[i])) * tol.eps ||
                      (std::isnan(ref[i]) && std::isnan(got[i]));
      if (!ok && bad++ == 0) first_bad = i;
    }
    EXPECT_EQ(bad, 0u) << name << ": " << bad << " of " << ref.size()
                       << " elements differ; first at [" << first_bad << "]: cuda "
                       << got[first_bad] << " vs cpu " << ref[first_bad];
  }
}

inline Tensor on(Target t, Shape shape, const std::vector<float>& values) {
  return Tensor::from_host(std::move(shape), values, t);
}

inline Tensor random_on(Target t, Shape shape, std::uint32_t seed, float lo = -1.0f,
                        float hi = 1.0f) {
  const std::size_t n = static_cast<std::size_t>(shape_numel(shape));
  return Tensor::from_host(std::move(shape), random_values(n, seed, lo, hi), t);
}

inline Tensor ids_on(Target t, const std::vector<std::int32_t>& ids) {
  return Tensor::from_host_ids({static_cast<std::int64_t>(ids.size())}, ids, t);
}

}  // namespace noeira::testing
