// Row gather on CUDA: the embedding lookup and the batch gather from a resident data set. Rows
// are copied as 4-byte words, so float and int32 tables share the kernel and no value is ever
// reinterpreted as a number.
#include <cstdint>

#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/launch.cuh"

namespace noeira::cuda {

namespace {

struct GatherWords {
  std::uint32_t* dst;
  const std::int32_t* index;
  const std::uint32_t* table;
  std::int64_t row_words;
  std::int64_t table_rows;
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t r = i / row_words;
    const std::int64_t c = i - r * row_words;
    const std::int64_t row = index[r];
    dst[i] = row < 0 || row >= table_rows ? kPoisonWord : table[row * row_words + c];
  }
};

}  // namespace

void gather_rows(Stream s, void* dst, const std::int32_t* index, const void* table,
                 std::int64_t rows, std::int64_t row_words, std::int64_t table_rows) {
  if (row_words <= 0) return;
  launch_map(s, rows * row_words,
             GatherWords{static_cast<std::uint32_t*>(dst), index,
                         static_cast<const std::uint32_t*>(table), row_words, table_rows});
}

}  // namespace noeira::cuda
