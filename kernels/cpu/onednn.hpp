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
