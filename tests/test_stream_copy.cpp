// kernels/cpu/stream_copy.hpp: every destination gets the source's bytes exactly, whatever the
// alignment of the destinations and the source and whatever the length (heads and tails of a
// cache line, blocks of the copy and a partial last block), and nothing around them is touched.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/stream_copy.hpp"

namespace {

TEST(StreamCopy, EveryDestinationGetsTheSourceAndNothingElse) {
  constexpr std::size_t kGuard = 80;
  for (std::size_t bytes : {0, 1, 15, 63, 64, 65, 200, 65536, 65536 + 17, 3 * 65536 + 63}) {
    for (std::size_t src_offset : {0, 3}) {
      std::vector<char> src(bytes + src_offset);
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 31 + 7);
      // Three destinations at different offsets from a cache line, each in a buffer of its own
      // with guard bytes on both sides.
      const std::size_t offsets[] = {0, 1, 37};
      std::vector<std::vector<char>> buffers;
      std::vector<char*> destinations;
      for (std::size_t offset : offsets) {
        buffers.emplace_back(bytes + offset + 2 * kGuard + 64, char{-5});
        char* base = buffers.back().data();
        const auto misaligned = reinterpret_cast<std::uintptr_t>(base) % 64;
        destinations.push_back(base + kGuard + (64 - misaligned) % 64 + offset);
      }
      noeira::cpu::stream_copy_to_each(destinations, src.data() + src_offset, bytes);
      for (std::size_t d = 0; d < destinations.size(); ++d) {
        const std::vector<char>& buffer = buffers[d];
        const auto begin = static_cast<std::size_t>(destinations[d] - buffer.data());
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < buffer.size(); ++i) {
          const bool inside = i >= begin && i < begin + bytes;
          const char want = inside ? src[src_offset + i - begin] : char{-5};
          wrong += buffer[i] == want ? 0 : 1;
        }
        EXPECT_EQ(wrong, 0u) << bytes << " bytes, destination " << d << ", source offset "
                             << src_offset;
      }
    }
  }
}

}  // namespace
