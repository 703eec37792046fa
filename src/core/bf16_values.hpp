#pragma once
// fp32 values rounded to bfloat16 values, still fp32 (kernels/bf16_math.hpp's rounding): through
// a bf16 copy on the table's target, with the table's conversions. y may be x.
#include <cstdint>

#include "core/tensor.hpp"
#include "kernels/kernel_table.hpp"

namespace noeira {

inline void round_to_bf16_values(const KernelTable& k, Stream s, float* y, const float* x,
                                 std::int64_t n) {
  if (n <= 0) return;
  Tensor bits({n}, k.target, DType::BF16);
  k.to_bf16(s, bits.as<std::uint16_t>(), x, n);
  k.from_bf16(s, GradMode::Overwrite, y, bits.as<std::uint16_t>(), n);
}

}  // namespace noeira
