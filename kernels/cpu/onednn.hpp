#pragma once
// What the CPU kernels that call oneDNN share: its CPU engine, and the rule that makes its
// results the same at any thread count.
//
// A oneDNN primitive fixes its thread count when it is built (omp_get_max_threads() then) and
// splits its work, and so its sums, by it; one built for 2 threads and run inside an OpenMP
// region of ours waits for a second thread that never comes. So the kernels build and run every
// primitive on the calling thread, under OneThreadScope, and spread only whole primitives over
// the threads, cut by the sizes alone.
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

namespace noeira::cpu {

inline const dnnl::engine& onednn_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Whether oneDNN has bf16 products and convolutions on this CPU: oneDNN 2.x has none below
// AVX-512 (no kernel, not even its reference one), and refuses to make their primitives. Where it
// has none, a bf16 product or convolution is the fp32 one of its operands' bf16 values
// (round_to_bf16_values, kernels/cpu/bf16_rounding.hpp): the product of two bf16 numbers is
// exact in fp32 and the sums are fp32, which is a bf16 kernel's arithmetic too; only the
// summation order and the speed are the fp32 kernel's. Asked once, of a small product.
inline bool onednn_has_bf16() {
  static const bool has = [] {
    try {
      using dnnl::memory;
      const memory::desc two({2, 2}, memory::data_type::bf16, memory::format_tag::ab);
      const memory::desc result({2, 2}, memory::data_type::f32, memory::format_tag::ab);
      (void)dnnl::matmul::primitive_desc(dnnl::matmul::desc(two, two, result), onednn_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return has;
}

// Holds the library threads (OpenBLAS's OpenMP build and oneDNN read omp_get_max_threads()) at one
// while a kernel runs, and remembers the threads the kernel may spread its work over. Threads of
// a region opened inside it inherit the one.
class OneThreadScope {
 public:
  OneThreadScope() : threads_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneThreadScope() { omp_set_num_threads(threads_); }
  OneThreadScope(const OneThreadScope&) = delete;
  OneThreadScope& operator=(const OneThreadScope&) = delete;

  int threads() const { return threads_; }

 private:
  int threads_;
};

}  // namespace noeira::cpu
