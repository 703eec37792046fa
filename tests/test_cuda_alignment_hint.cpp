// The alignment cuBLASLt's heuristic is told (kernels/cuda/alignment_hint.hpp): a function of a
// matrix's offset and a batch's stride only, capped at 16 bytes so that where the allocator put
// the buffer (256-byte aligned or more) cannot change the algorithm. Pure host arithmetic: runs
// without a GPU and in builds without CUDA.
#include "kernels/cuda/alignment_hint.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace noeira {
namespace {

using cuda::alignment_hint;
using cuda::kMaxAlignmentHint;

constexpr std::uint32_t kFloat = sizeof(float);
constexpr std::uint32_t kBf16 = 2;

TEST(CudaAlignmentHint, NeverPastSixteenBytesHoweverAlignedTheBuffer) {
  for (std::uintptr_t base : {std::uintptr_t{256}, std::uintptr_t{4096}, std::uintptr_t{1} << 21}) {
    EXPECT_EQ(alignment_hint(base, 0, kFloat), kMaxAlignmentHint) << base;
    EXPECT_EQ(alignment_hint(base, 0, kBf16), kMaxAlignmentHint) << base;
  }
  EXPECT_EQ(kMaxAlignmentHint, 16u);
}

TEST(CudaAlignmentHint, DependsOnTheOffsetNotOnTheBase) {
  // Two allocations of different alignment (256 and 1 MiB), the same view offsets into them.
  const std::uintptr_t bases[] = {0x7f0000000100, 0x7f0000100000};
  for (std::uint64_t offset = 0; offset < 64; ++offset) {
    const std::uint32_t first = alignment_hint(bases[0] + offset * kFloat, 0, kFloat);
    EXPECT_EQ(alignment_hint(bases[1] + offset * kFloat, 0, kFloat), first) << offset;
  }
}

TEST(CudaAlignmentHint, FollowsTheOffsetInElements) {
  const std::uintptr_t base = 0x7f0000000000;
  EXPECT_EQ(alignment_hint(base + 1 * kFloat, 0, kFloat), 4u);
  EXPECT_EQ(alignment_hint(base + 2 * kFloat, 0, kFloat), 8u);
  EXPECT_EQ(alignment_hint(base + 4 * kFloat, 0, kFloat), 16u);
  EXPECT_EQ(alignment_hint(base + 12 * kFloat, 0, kFloat), 16u);
  EXPECT_EQ(alignment_hint(base + 1 * kBf16, 0, kBf16), 2u);
  EXPECT_EQ(alignment_hint(base + 6 * kBf16, 0, kBf16), 4u);
}

TEST(CudaAlignmentHint, EveryItemOfABatchHasIt) {
  const std::uintptr_t base = 0x7f0000000000;
  // Heads 12 floats apart: items at 48-byte steps are 16-byte aligned.
  EXPECT_EQ(alignment_hint(base, 12 * kFloat, kFloat), 16u);
  // Heads 6 floats apart: the second item is only 8-byte aligned.
  EXPECT_EQ(alignment_hint(base, 6 * kFloat, kFloat), 8u);
  // An odd stride leaves the element's own alignment.
  EXPECT_EQ(alignment_hint(base, 3 * kFloat, kFloat), 4u);
  EXPECT_EQ(alignment_hint(base, 3 * kBf16, kBf16), 2u);
}

}  // namespace
}  // namespace noeira
