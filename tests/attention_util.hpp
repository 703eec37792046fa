#pragma once
// Helpers shared by the attention tests (test_attention*.cpp, test_cuda_attention.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "gradcheck.hpp"

namespace noeira::testing {

inline const Init kAttentionInit(Target::Cpu, InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, 42});

// A [batch, seq, width] input drawn from U(lo, hi).
inline Tensor sequence_input(std::int64_t batch, std::int64_t seq, std::int64_t width,
                             std::uint32_t seed, Target target = Target::Cpu, float lo = -1.0f,
                             float hi = 1.0f) {
  return Tensor::from_host(
      {batch, seq, width},
      random_values(static_cast<std::size_t>(batch * seq * width), seed, lo, hi), target);
}

inline Tensor key_lengths(const std::vector<std::int32_t>& lengths, Target target = Target::Cpu) {
  return Tensor::from_host_ids({static_cast<std::int64_t>(lengths.size())}, lengths, target);
}

// Every parameter drawn from U(-bound, bound): biases away from 0, so that the checks see them.
template <class M>
void randomize_weights(M& m, std::uint32_t seed, float bound = 0.5f) {
  for_each_param(m, [&](const std::string&, Param& p) {
    p.val.copy_from(random_values(static_cast<std::size_t>(p.numel()), seed++, -bound, bound));
  });
}

inline std::vector<std::string> param_names(auto& m) {
  std::vector<std::string> names;
  for_each_param(m, [&](const std::string& name, Param&) { names.push_back(name); });
  return names;
}

}  // namespace noeira::testing
