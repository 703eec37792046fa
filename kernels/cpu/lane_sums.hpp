#pragma once
// Sums in double into kLanes fixed lanes: term i of a run goes into lane i % kLanes, runs in
// order, and the lanes are added in lane order at the end. The order of every addition is fixed
// by the data's length alone, so nothing depends on the thread count or the vector width, and the
// lanes vectorize (inside with_vector_isa): one running sum is a chain of dependent double adds,
// which was 17 % of a resnet20 step in BatchNorm and 7 % of a gpt-char step in LayerNorm.
#include <array>
#include <cstdint>

namespace noeira::cpu {

// Four AVX-512 vectors of doubles: four independent chains of adds, so that their latency hides.
constexpr std::int64_t kLanes = 32;

// K sums at once over the same terms.
template <int K>
struct LaneSums {
  double lanes[K][kLanes] = {};

  // Adds terms(i) (K doubles, one to each sum) for i in [0, n): one run.
  template <class Terms>
  void add(std::int64_t n, const Terms& terms) {
    const std::int64_t whole = n - n % kLanes;
    for (std::int64_t i = 0; i < whole; i += kLanes) {
      for (std::int64_t l = 0; l < kLanes; ++l) {
        const std::array<double, K> t = terms(i + l);
        for (int k = 0; k < K; ++k) lanes[k][l] += t[static_cast<std::size_t>(k)];
      }
    }
    for (std::int64_t i = whole; i < n; ++i) {
      const std::array<double, K> t = terms(i);
      for (int k = 0; k < K; ++k) lanes[k][i - whole] += t[static_cast<std::size_t>(k)];
    }
  }

  double total(int k) const {
    double sum = 0.0;
    for (std::int64_t l = 0; l < kLanes; ++l) sum += lanes[k][l];
    return sum;
  }
};

}  // namespace noeira::cpu
