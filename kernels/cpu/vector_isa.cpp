#include "kernels/cpu/vector_isa.hpp"

#include <atomic>

namespace noeira::cpu {

namespace {

VectorIsa detect() {
  // __builtin_cpu_supports also checks that the OS saves the registers (XCR0).
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2")) {
    return VectorIsa::Avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2")) {
    return VectorIsa::Avx2;
  }
  return VectorIsa::Sse2;
}

std::atomic<VectorIsa>& current() {
  static std::atomic<VectorIsa> isa{best_vector_isa()};
  return isa;
}

}  // namespace

VectorIsa best_vector_isa() {
  static const VectorIsa best = detect();
  return best;
}

VectorIsa vector_isa() { return current().load(std::memory_order_relaxed); }

void set_vector_isa(VectorIsa isa) {
  const VectorIsa best = best_vector_isa();
  current().store(static_cast<std::uint8_t>(isa) > static_cast<std::uint8_t>(best) ? best : isa,
                  std::memory_order_relaxed);
}

}  // namespace noeira::cpu
