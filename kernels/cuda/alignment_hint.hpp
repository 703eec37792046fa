#pragma once
// The alignment that cuBLASLt's heuristic is told its matrices have (kernels/cuda/matmul.cpp).
// Host-only and free of CUDA headers, so the CPU tests can check it.
//
// It must be a function of the shapes only, never of where the allocator put a buffer: the
// heuristic's choice of algorithm, and so the bits of a product, follows the hint, and the
// bit-exact GPU tests would see two calls of the same shapes differ. Every buffer a product
// reads or writes starts where cudaMalloc (kernels/cuda/memory.cpp: at least 256-byte aligned)
// or cudaMallocAsync (kernels/cuda/scratch.hpp: aligned for any type, so at least 16 bytes)
// put it, plus an offset in elements that the shapes fix (a view into a parameter buffer, a
// batch's item). Alignments up to 16 bytes then depend on that offset alone, larger ones on the
// allocator too, so the hint stops at 16 (docs/design.md, "CUDA: launch bounds and
// reproducible library choices").
#include <cstdint>

namespace noeira::cuda {

inline constexpr std::uint32_t kMaxAlignmentHint = 16;

// The largest power of two, from element_bytes up to kMaxAlignmentHint, that divides `address`
// and `stride_bytes` (the distance between a strided batch's items; 0 for a single matrix), so
// that every item of the batch has it.
constexpr std::uint32_t alignment_hint(std::uintptr_t address, std::uint64_t stride_bytes,
                                       std::uint32_t element_bytes) {
  std::uint32_t bytes = kMaxAlignmentHint;
  while (bytes > element_bytes && (address % bytes != 0 || stride_bytes % bytes != 0)) bytes /= 2;
  return bytes;
}

}  // namespace noeira::cuda
