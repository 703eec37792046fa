#pragma once
// IEEE binary16 ("half", NumPy's float16, safetensors' F16) to float: exact, every half is a
// float. Shared by the readers that meet it (io/safetensors.cpp, io/npy.cpp).
#include <bit>
#include <cmath>
#include <cstdint>

namespace noeira::io {

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const int exponent = (h >> 10) & 0x1f;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) {
    return std::bit_cast<float>(sign | (static_cast<std::uint32_t>(exponent + 112) << 23) |
                                (mantissa << 13));
  }
  // Zero or subnormal: mantissa x 2^-24.
  const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  return sign != 0 ? -magnitude : magnitude;
}

}  // namespace noeira::io
