#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/cpu/cpu_kernels.hpp"

namespace noeira::cpu {

namespace {
// A cache line and an AVX-512 vector: enough for any SIMD load the compiler emits.
constexpr std::size_t kAlignment = 64;
}  // namespace

void* allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void release(void* ptr) { std::free(ptr); }

void copy_bytes(Stream, void* dst, const void* src, std::size_t bytes) {
  if (bytes != 0 && dst != src) std::memmove(dst, src, bytes);
}

// Host memory is the CPU target's live memory: upload and download are plain copies.
void upload(Stream s, void* dst, const void* host_src, std::size_t bytes) {
  copy_bytes(s, dst, host_src, bytes);
}

void download(Stream s, void* host_dst, const void* src, std::size_t bytes) {
  copy_bytes(s, host_dst, src, bytes);
}

void synchronize(Stream) {}

}  // namespace noeira::cpu
