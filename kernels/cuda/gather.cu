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
  __device__ void operator()(std::int64_t i) const {
    const std::int64_t r = i / row_words;
    const std::int64_t c = i - r * row_words;
    dst[i] = table[static_cast<std::int64_t>(index[r]) * row_words + c];
  }
};

}  // namespace

void gather_rows(Stream s, void* dst, const std::int32_t* index, const void* table,
                 std::int64_t rows, std::int64_t row_words) {
  if (row_words <= 0) return;
  launch_map(s, rows * row_words,
             GatherWords{static_cast<std::uint32_t*>(dst), index,
                         static_cast<const std::uint32_t*>(table), row_words});
}

}  // namespace noeira::cuda
