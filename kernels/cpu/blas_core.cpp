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

std::string blas_core_override() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return {};
  // Only the generic fallback is overridden: a core OpenBLAS recognised is its own choice.
  if (strcasecmp(blas_core().c_str(), "Prescott") != 0) return {};
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

void reexec_with_blas_core(char** argv) {
  const std::string core = blas_core_override();
  if (core.empty()) return;
  if (setenv("OPENBLAS_CORETYPE", core.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Only reached when the exec failed: go on with the fallback kernels, as without the fix.
  unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace noeira::cpu
