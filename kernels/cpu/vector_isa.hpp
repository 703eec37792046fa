#pragma once
// The vector width of the element-wise loops, chosen at run time from the CPU's features.
//
// The kernels are compiled for baseline x86-64 (SSE2: 4 floats a vector) so that one binary runs
// everywhere. A hot loop body passed to with_vector_isa() is inlined (flatten) into one of three
// copies compiled for SSE2, AVX2 (8 floats) or AVX-512 (16 floats), and the best the CPU and the
// OS support runs. The kernels are compiled with -ffp-contract=off, so no copy fuses a multiply
// and an add where another does not: every copy, every vector lane and every scalar tail performs
// the same IEEE operations, and the results are bit-identical whatever the width (a test checks
// it). Measured on GELU (forward + derivative, 393k floats, AVX-512 machine): 4.2 ns per element
// on SSE2, 2.1 on AVX2, 1.3 on AVX-512.
//
// The body must be a plain loop over its data: OpenMP regions go around with_vector_isa, not
// inside it (an outlined region would not inherit the wider target).
#include <cstdint>

namespace noeira::cpu {

enum class VectorIsa : std::uint8_t { Sse2, Avx2, Avx512 };

// The widest the CPU and OS support (detected once).
VectorIsa best_vector_isa();
// What the loops use: best_vector_isa() unless set_vector_isa chose a narrower one.
VectorIsa vector_isa();
// For tests and measurements: run the loops at `isa` (clamped to best_vector_isa()). Not
// thread-safe with running kernels.
void set_vector_isa(VectorIsa isa);

namespace detail {
template <class F>
__attribute__((target("avx2,fma,bmi,bmi2"), flatten)) void run_avx2(const F& f) {
  f();
}
template <class F>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,bmi,bmi2,"
                      "prefer-vector-width=512"),
               flatten)) void run_avx512(const F& f) {
  f();
}
}  // namespace detail

// Runs f() compiled for the current vector_isa().
template <class F>
void with_vector_isa(const F& f) {
  switch (vector_isa()) {
    case VectorIsa::Avx512: return detail::run_avx512(f);
    case VectorIsa::Avx2: return detail::run_avx2(f);
    case VectorIsa::Sse2: break;
  }
  f();
}

}  // namespace noeira::cpu
