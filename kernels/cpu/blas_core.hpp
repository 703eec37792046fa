#pragma once
// Which kernels OpenBLAS runs on this CPU, and a fix for the case where its runtime detection
// picks the wrong ones.
//
// The DYNAMIC_ARCH build (Debian's) chooses its kernels once, when the library is loaded, from
// the CPU's vendor, family and model. OpenBLAS 0.3.21 (Debian bookworm) does not know newer
// Intel models (Sapphire / Emerald Rapids: family 6, extended model 0xC): its lookup falls
// through to the generic SSE3 "Prescott" kernels although the CPU has AVX-512. Measured on such
// a machine (2 cores, KVM, 768x384x128 sgemm, 2 threads): Prescott 14-22 GFLOP/s, Cooperlake
// 202, SkylakeX 144, Haswell 125; a gpt-char training step 186 ms -> 80 ms.
//
// The choice reads the environment variable OPENBLAS_CORETYPE, before main. So a program that
// finds OpenBLAS on its fallback sets the variable to the kernels the CPU's features allow and
// executes itself again (`reexec_with_blas_core`), before anything else has happened (no MPI,
// no threads, no files). A variable the user set is always respected; on a CPU that OpenBLAS
// knows nothing changes.
#include <string>

namespace noeira::cpu {

// The kernels OpenBLAS runs ("Cooperlake", "Haswell", "Zen", ...).
std::string blas_core();

// The OPENBLAS_CORETYPE this process should have been started with: empty when OpenBLAS chose
// well (or OPENBLAS_CORETYPE is set), else the best kernels the CPU's features allow.
std::string blas_core_override();

// If blas_core_override() names kernels: sets OPENBLAS_CORETYPE and replaces this process with
// a fresh start of the same executable and argv (does not return). Otherwise, or if the exec
// fails, returns and the run goes on with the kernels it has.
void reexec_with_blas_core(char** argv);

}  // namespace noeira::cpu
