#pragma once
// Floats rounded to their bfloat16 bits (kernels/bf16_math.hpp's bf16_bits: nearest even, a NaN
// stays a quiet NaN) on the calling thread, through the CPU's own conversion where it has one.
//
// AVX512_BF16's vcvtne2ps2bf16 rounds exactly as bf16_bits does on every input but the
// denormals, which it flushes to zero (all 2^32 floats compared on a Xeon with AMX: 16,711,678
// differ, every one a denormal). So a block of 32 holding a denormal goes through bf16_bits, and
// the bits are bf16_bits' everywhere, with or without the instruction. In cache it converts about
// twice as fast (16.7 against 8.8 thousand million floats a second at 64 Ki on one core), which is
// what rounding a product's small operands (attention's per-head items) costs.
#include <cstdint>

namespace noeira::cpu {

void round_to_bf16_bits(std::uint16_t* out, const float* in, std::int64_t n);
// The same, widened back to floats: each float becomes its bfloat16 value (out may be in).
void round_to_bf16_values(float* out, const float* in, std::int64_t n);

// Whether the CPU has the conversion (round_to_bf16_bits uses it while vector_isa() is AVX-512).
bool cpu_converts_bf16();

}  // namespace noeira::cpu
