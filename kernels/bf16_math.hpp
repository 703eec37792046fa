#pragma once
// bfloat16 as the matrix products of --precision bf16 round their operands: the upper 16 bits of
// an fp32, rounded to nearest even; a NaN stays a (quiet) NaN, infinities stay infinite.
#include <cstdint>
#include <cstring>

#include "kernels/hd.hpp"

namespace noeira {

NOEIRA_HD std::uint16_t bf16_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

NOEIRA_HD float bf16_value(std::uint16_t bf16) {
  const std::uint32_t bits = static_cast<std::uint32_t>(bf16) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// The fp32 value of value's bfloat16.
NOEIRA_HD float round_to_bf16(float value) { return bf16_value(bf16_bits(value)); }

}  // namespace noeira
