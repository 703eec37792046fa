#pragma once
// Products of sizes (element counts, shape dimensions, counts read from file headers) that may
// not wrap: a header field or a shape can be anything, and a wrapped product is an allocation of
// the wrong size or a negative count further on.
#include <cstdint>
#include <initializer_list>
#include <optional>

namespace noeira {

// The product of non-negative factors, or nullopt when a factor is negative or the product
// leaves int64.
inline std::optional<std::int64_t> size_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t n = 1;
  for (std::int64_t f : factors) {
    if (f < 0 || __builtin_mul_overflow(n, f, &n)) return std::nullopt;
  }
  return n;
}

}  // namespace noeira
