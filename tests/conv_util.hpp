#pragma once
// Helpers shared by the convolution tests (test_conv.cpp, test_conv_torch.cpp).
#include <cstdint>
#include <string>

#include "gradcheck.hpp"
#include "nn/image_shape.hpp"

namespace noeira::testing {

// An image batch [rows, C, H, W] of values in [-1, 1].
inline Tensor image_input(std::int64_t rows, ImageShape s, std::uint32_t seed,
                          Target target = Target::Cpu) {
  const Shape shape = image_batch_shape(rows, s);
  return Tensor::from_host(shape, random_values(static_cast<std::size_t>(shape_numel(shape)), seed),
                           target);
}

// Every parameter drawn from [-1, 1] (biases start at 0, which would hide them in a check).
template <class M>
void randomize_conv_params(M& m, std::uint32_t seed) {
  for_each_param(m, [&](const std::string&, Param& p) {
    p.val.copy_from(random_values(static_cast<std::size_t>(p.numel()), seed++));
  });
}

}  // namespace noeira::testing
