#include "kernels/cpu/bf16_rounding.hpp"

#include <immintrin.h>

#include "kernels/bf16_math.hpp"
#include "kernels/cpu/vector_isa.hpp"

namespace noeira::cpu {

namespace {

void round_in_software(std::uint16_t* out, const float* in, std::int64_t n) {
  with_vector_isa([&] {
    std::uint16_t* __restrict o = out;
    const float* __restrict x = in;
    for (std::int64_t i = 0; i < n; ++i) o[i] = bf16_bits(x[i]);
  });
}

// The lanes of v whose float is a denormal: exponent bits clear, fraction bits not.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) __mmask16 denormal_lanes(
    __m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  return _mm512_testn_epi32_mask(bits, _mm512_set1_epi32(0x7F800000)) &
         _mm512_test_epi32_mask(bits, _mm512_set1_epi32(0x007FFFFF));
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void round_with_the_cpu(
    std::uint16_t* out, const float* in, std::int64_t n) {
  constexpr std::int64_t kBlock = 32;
  std::int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    const __m512 low = _mm512_loadu_ps(in + i);
    const __m512 high = _mm512_loadu_ps(in + i + 16);
    if ((denormal_lanes(low) | denormal_lanes(high)) != 0) {
      round_in_software(out + i, in + i, kBlock);
      continue;
    }
    _mm512_storeu_si512(out + i, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(high, low)));
  }
  round_in_software(out + i, in + i, n - i);
}

bool detect() {
  __builtin_cpu_init();
  return best_vector_isa() == VectorIsa::Avx512 && __builtin_cpu_supports("avx512bf16");
}

}  // namespace

bool cpu_converts_bf16() {
  static const bool available = detect();
  return available;
}

void round_to_bf16_bits(std::uint16_t* out, const float* in, std::int64_t n) {
  // The instruction is AVX-512's: a narrower set_vector_isa() rounds in software, at its width.
  if (cpu_converts_bf16() && vector_isa() == VectorIsa::Avx512) {
    round_with_the_cpu(out, in, n);
  } else {
    round_in_software(out, in, n);
  }
}

void round_to_bf16_values(float* out, const float* in, std::int64_t n) {
  constexpr std::int64_t kBlock = 1024;  // bits on the stack, a block at a time
  std::uint16_t bits[kBlock];
  for (std::int64_t i = 0; i < n; i += kBlock) {
    const std::int64_t count = n - i < kBlock ? n - i : kBlock;
    round_to_bf16_bits(bits, in + i, count);
    for (std::int64_t j = 0; j < count; ++j) out[i + j] = bf16_value(bits[j]);
  }
}

}  // namespace noeira::cpu
