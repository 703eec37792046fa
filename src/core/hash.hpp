#pragma once
// FNV-1a: a stable 64-bit hash of names, used to derive random streams from dotted parameter and
// layer paths (the same name gives the same stream on every machine and rank count).
#include <cstdint>
#include <string_view>

namespace noeira {

constexpr std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace noeira
