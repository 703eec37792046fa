#pragma once
// A batch for a whole model in tests: token ids for a language model (rows of its block, ids
// drawn from the seed), rows of random features otherwise.
#include <cstdint>
#include <vector>

#include "core/tensor.hpp"
#include "gradcheck.hpp"

namespace noeira::testing {

template <class M>
Tensor model_input(std::int64_t rows, std::uint32_t seed, Target target = Target::Cpu) {
  if constexpr (requires { M::vocab; }) {
    std::vector<std::int32_t> ids;
    for (std::int64_t i = 0; i < rows * M::block; ++i) {
      ids.push_back(static_cast<std::int32_t>((i * 13 + seed) % M::vocab));
    }
    return Tensor::from_host_ids({rows, M::block}, ids, target);
  } else {
    return Tensor::from_host({rows, M::in_dim},
                             random_values(static_cast<std::size_t>(rows * M::in_dim), seed),
                             target);
  }
}

}  // namespace noeira::testing
