#include "kernels/cpu/blas_core.hpp"

#include <strings.h>
#include <unistd.h>

#include <cstdlib>

extern "C" char* openblas_get_corename(void);

namespace noeira::cpu {

std::string blas_core() {
  const char* name = openblas_get_corename();
  return name != nullptr ? name : "";
}

namespace {

// The kernels the CPU's features allow, best first.
std::string best_core_for_this_cpu() {
  // __builtin_cpu_supports also checks that the OS saves the vector registers (XCR0).
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512bf16")) return "Cooperlake";
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  if (__builtin_cpu_supports("avx")) return "Sandybridge";
  return {};
}

// How far up the x86 vector extensions a core's kernels go: 0 for SSE (Prescott and the other
// fallbacks), 1 AVX, 2 AVX2 + FMA (Haswell and AMD's Zen, which uses Haswell's kernels), 3
// AVX-512; -1 for a name not listed, which is never overridden (a newer OpenBLAS's own pick).
int vector_level(const std::string& core) {
  struct Level {
    const char* core;
    int level;
  };
  static constexpr Level kLevels[] = {
      {"Prescott", 0},   {"Core2", 0},    {"Penryn", 0},   {"Dunnington", 0}, {"Nehalem", 0},
      {"Atom", 0},       {"Barcelona", 0}, {"Opteron", 0},  {"Bobcat", 0},     {"Sandybridge", 1},
      {"Bulldozer", 1},  {"Piledriver", 1}, {"Steamroller", 1}, {"Excavator", 1},
      {"Haswell", 2},    {"Zen", 2},      {"SkylakeX", 3}, {"Cooperlake", 3},
  };
  for (const Level& l : kLevels) {
    if (strcasecmp(core.c_str(), l.core) == 0) return l.level;
  }
  return -1;
}

}  // namespace

std::string blas_core_override() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return {};
  const std::string chosen = blas_core();
  const std::string best = best_core_for_this_cpu();
  const int have = vector_level(chosen);
  // Only a choice below what the CPU runs is overridden: the generic fallback, or AVX2 kernels on
  // an AVX-512 CPU that OpenBLAS 0.3.21 files under an older family (AMD's Zen 4 and 5).
  if (have < 0 || best.empty() || vector_level(best) <= have) return {};
  return best;
}

void reexec_with_blas_core(char** argv) {
  const std::string core = blas_core_override();
  if (core.empty()) return;
  if (setenv("OPENBLAS_CORETYPE", core.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Only reached when the exec failed: go on with the fallback kernels, as without the fix.
  unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace noeira::cpu
