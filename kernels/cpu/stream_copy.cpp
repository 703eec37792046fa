#include "kernels/cpu/stream_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace noeira::cpu {

namespace {

// A block of the source small enough to stay in L1/L2 while it is written to every destination.
constexpr std::size_t kBlockBytes = 64 * 1024;

#if defined(__SSE2__)
// One destination's block: the head up to a cache line and the tail through memcpy, the rest as
// whole cache lines of 16-byte non-temporal stores.
void stream_block(char* dst, const char* src, std::size_t bytes) {
  const std::size_t head =
      std::min(bytes, static_cast<std::size_t>(-reinterpret_cast<std::uintptr_t>(dst) & 63));
  std::memcpy(dst, src, head);
  std::size_t at = head;
  for (; at + 64 <= bytes; at += 64) {
    const auto* from = reinterpret_cast<const __m128i*>(src + at);
    auto* to = reinterpret_cast<__m128i*>(dst + at);
    const __m128i a = _mm_loadu_si128(from), b = _mm_loadu_si128(from + 1);
    const __m128i c = _mm_loadu_si128(from + 2), d = _mm_loadu_si128(from + 3);
    _mm_stream_si128(to, a);
    _mm_stream_si128(to + 1, b);
    _mm_stream_si128(to + 2, c);
    _mm_stream_si128(to + 3, d);
  }
  std::memcpy(dst + at, src + at, bytes - at);
}
#endif

}  // namespace

void stream_copy_to_each(std::span<char* const> destinations, const char* src, std::size_t bytes) {
#if defined(__SSE2__)
  for (std::size_t at = 0; at < bytes; at += kBlockBytes) {
    const std::size_t n = std::min(kBlockBytes, bytes - at);
    for (char* dst : destinations) stream_block(dst + at, src + at, n);
  }
  _mm_sfence();
#else
  for (char* dst : destinations) std::memcpy(dst, src, bytes);
#endif
}

}  // namespace noeira::cpu
