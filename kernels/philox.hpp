#pragma once
// Philox4x32-10 (Salmon et al., SC'11): a counter-based generator. A value depends only on
// (key, counter), never on thread count, rank count or the order of calls, which is what
// makes initialization and dropout masks reproducible across any parallel layout.
#include <cstdint>

#include "kernels/hd.hpp"

namespace noeira::philox {

struct Block {
  std::uint32_t v[4];
};

NOEIRA_HD std::uint32_t mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t* hi) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  *hi = static_cast<std::uint32_t>(p >> 32);
  return static_cast<std::uint32_t>(p);
}

// Four 32-bit random words for a 128-bit counter (c0..c3) under a 64-bit key.
NOEIRA_HD Block generate(std::uint64_t key, std::uint32_t c0, std::uint32_t c1, std::uint32_t c2,
                         std::uint32_t c3) {
  std::uint32_t k0 = static_cast<std::uint32_t>(key);
  std::uint32_t k1 = static_cast<std::uint32_t>(key >> 32);
  std::uint32_t x0 = c0, x1 = c1, x2 = c2, x3 = c3;
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, hi1;
    const std::uint32_t lo0 = mulhilo(0xD2511F53u, x0, &hi0);
    const std::uint32_t lo1 = mulhilo(0xCD9E8D57u, x2, &hi1);
    x0 = hi1 ^ x1 ^ k0;
    x1 = lo1;
    x2 = hi0 ^ x3 ^ k1;
    x3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Block{{x0, x1, x2, x3}};
}

// A float uniform in the open interval (0, 1): never 0, so log() is safe for Box-Muller.
NOEIRA_HD float to_unit_open(std::uint32_t x) {
  return (static_cast<float>(x >> 8) + 0.5f) * (1.0f / 16777216.0f);
}

// The 64-bit counter index split into two words; stream selects an independent sequence.
NOEIRA_HD Block at(std::uint64_t key, std::uint64_t stream, std::uint64_t index) {
  return generate(key, static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                  static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32));
}

}  // namespace noeira::philox
