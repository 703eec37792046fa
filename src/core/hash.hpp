#pragma once
// FNV-1a: a stable 64-bit hash of names, used to derive random streams from dotted parameter and
// layer paths (the same name gives the same stream on every machine and rank count).
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <span>
#include <string>
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

// A 64-bit hash of a block of memory, FNV-1a's step on 8-byte words (a tail of fewer bytes is
// padded with zeros): tens of milliseconds for a data set's hundreds of megabytes, so that ranks
// can compare what each loaded at start-up. Chained through `h`.
template <class T>
std::uint64_t hash_words(std::span<const T> data, std::uint64_t h = 1469598103934665603ull) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  const std::size_t n = data.size_bytes();
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, bytes + i, n - i < 8 ? n - i : 8);
    h ^= word;
    h *= 1099511628211ull;
  }
  return h;
}

// A hash as messages show it: 16 hexadecimal digits.
inline std::string hex64(std::uint64_t h) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace noeira
