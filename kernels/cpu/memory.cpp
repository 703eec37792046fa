#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/parallel.hpp"

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

Stream create_stream() { return nullptr; }
void destroy_stream(Stream) {}

void gather_rows(Stream, void* dst, const std::int32_t* index, const void* table,
                 std::int64_t rows, std::int64_t row_words, std::int64_t table_rows) {
  const std::size_t row_bytes = static_cast<std::size_t>(row_words) * 4;
  parallel_for_rows(rows, row_words, [&](std::int64_t r) {
    char* out = static_cast<char*>(dst) + static_cast<std::size_t>(r) * row_bytes;
    if (index[r] < 0 || index[r] >= table_rows) {
      std::uint32_t* words = reinterpret_cast<std::uint32_t*>(out);
      for (std::int64_t c = 0; c < row_words; ++c) words[c] = kPoisonWord;
      return;
    }
    std::memcpy(out, static_cast<const char*>(table) + static_cast<std::size_t>(index[r]) * row_bytes,
                row_bytes);
  });
}

}  // namespace noeira::cpu
