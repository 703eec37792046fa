#pragma once
// What gather_pixels computes for one byte, written once for the CPU and CUDA kernels (and the
// tests): the normalization of kernel_table.hpp's PixelNormalization.
#include <cstdint>

#include "kernels/hd.hpp"

namespace noeira {

// byte · scale + shift with two roundings. nvcc fuses a multiply-add unless told not to, which
// would move some inputs by an ulp from the CPU's (the CPU kernels build with -ffp-contract=off).
NOEIRA_HD float normalized_pixel(std::uint8_t byte, float scale, float shift) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(__fmul_rn(static_cast<float>(byte), scale), shift);
#else
  return static_cast<float>(byte) * scale + shift;
#endif
}

}  // namespace noeira
