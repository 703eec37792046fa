#pragma once
// Helpers shared by the leaf tests (test_activation, test_norm, test_embedding_dropout).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gradcheck.hpp"

namespace noeira::testing {

inline const Init kLeafInit(Target::Cpu, InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, 42});

inline Tensor random_input(std::int64_t rows, std::int64_t cols, std::uint32_t seed,
                           float lo = -1.0f, float hi = 1.0f) {
  return Tensor::from_host({rows, cols},
                           random_values(static_cast<std::size_t>(rows * cols), seed, lo, hi));
}

// Moves every parameter away from its initial constant (norm scales start at exactly 1), so a
// gradient check also exercises the parameters' role in the formulas.
template <Module M>
void randomize_params(M& m, std::uint32_t seed) {
  for_each_param(m, [&](const std::string&, Param& p) {
    p.val.copy_from(random_values(static_cast<std::size_t>(p.numel()), seed++, 0.5f, 1.5f));
  });
}

// Row counts for gradient checks: a batch of one, then odd sizes drawn from a fixed seed.
inline std::vector<std::int64_t> test_row_counts(std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> odd(1, 8);
  return {1, 2 * odd(gen) + 1, 2 * odd(gen) + 1};
}

inline std::vector<float> param_grad(auto& m, const std::string& wanted) {
  std::vector<float> g;
  for_each_param(m, [&](const std::string& name, Param& p) {
    if (name == wanted) g = p.grd.to_vector();
  });
  return g;
}

}  // namespace noeira::testing
