#pragma once
// Which kernels OpenBLAS runs on this CPU, and a fix for the case where its runtime detection
// picks the wrong ones.
//
// The DYNAMIC_ARCH build (Debian's) chooses its kernels once, when the library is loaded, from
// the CPU's vendor, family and model. OpenBLAS 0.3.21 (Debian bookworm) does not know newer
// Intel models (Sapphire / Emerald Rapids: family 6, extended model 0xC): its lookup falls
// through to the generic SSE3 "Prescott" kernels although the CPU has AVX-512. Measured on such
// a machine (2 cores, KVM, 768x384x128 sgemm, 2 threads): Prescott 14-22 GFLOP/s, Cooperlake
// 202, SkylakeX 144, Haswell 125; a gpt-char training step 186 ms -> 80 ms. It files AMD's Zen 4
// and Zen 5 (AVX-512) under Zen and runs the AVX2 Haswell kernels. Measured on a Zen 5 guest
// (family 0x1A, 2 cores, sgemm 1024^3, 2 threads): Haswell 77 GFLOP/s, Zen 73, SkylakeX 138,
// Cooperlake 148. The Haswell kernels there also round a row of a product differently with the
// number of rows, so a run's evaluation on 2 ranks and on 1 differed in the last bit.
//
// The choice reads the environment variable OPENBLAS_CORETYPE, before main. So a program that
// finds OpenBLAS on kernels below the CPU's vector extensions sets the variable to the kernels
// the CPU's features allow and executes itself again (`reexec_with_blas_core`), before anything
// else has happened (no MPI, no threads, no files). A variable the user set is always
// respected; where OpenBLAS picks kernels as wide as the CPU's, nothing changes.
#include <string>

namespace noeira::cpu {

// The kernels OpenBLAS runs ("Cooperlake", "Haswell", "Zen", ...).
std::string blas_core();

// The OPENBLAS_CORETYPE this process should have been started with: empty when OpenBLAS chose
// kernels as wide as the CPU's (or OPENBLAS_CORETYPE is set, or OpenBLAS named kernels this list
// does not know), else the best kernels the CPU's features allow.
std::string blas_core_override();

// If blas_core_override() names kernels: sets OPENBLAS_CORETYPE and replaces this process with
// a fresh start of the same executable and argv (does not return). Otherwise, or if the exec
// fails, returns and the run goes on with the kernels it has.
void reexec_with_blas_core(char** argv);

}  // namespace noeira::cpu
