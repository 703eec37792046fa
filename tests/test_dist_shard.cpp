// Shard arithmetic on sizes that do not divide evenly, N = 1..5: every parameter element is owned
// by exactly one rank, slices are equal, contiguous and aligned, and pieces reassemble params.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "distributed/shard.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {
namespace {

TEST(DistShard, IntersectClosedForms) {
  EXPECT_EQ(intersect({0, 10}, {5, 20}), (Range{5, 10}));
  EXPECT_EQ(intersect({5, 20}, {0, 10}), (Range{5, 10}));
  EXPECT_TRUE(intersect({0, 10}, {10, 20}).empty());
  EXPECT_TRUE(intersect({0, 3}, {7, 9}).empty());
  EXPECT_EQ(intersect({2, 4}, {0, 10}), (Range{2, 4}));
}

TEST(DistShard, EvenPartsTileTheCountWithSizesOneApart) {
  EXPECT_EQ(even_part(10, 4, 0), (Range{0, 3}));
  EXPECT_EQ(even_part(10, 4, 1), (Range{3, 6}));
  EXPECT_EQ(even_part(10, 4, 2), (Range{6, 8}));
  EXPECT_EQ(even_part(10, 4, 3), (Range{8, 10}));
  EXPECT_TRUE(even_part(2, 5, 4).empty());
  for (std::int64_t count : {0, 1, 3, 7, 1003}) {
    for (int parts = 1; parts <= 8; ++parts) {
      std::int64_t next = 0, smallest = count, largest = 0;
      for (int p = 0; p < parts; ++p) {
        const Range r = even_part(count, parts, p);
        EXPECT_EQ(r.begin, next) << count << " in " << parts;
        next = r.end;
        smallest = std::min(smallest, r.size());
        largest = std::max(largest, r.size());
      }
      EXPECT_EQ(next, count);
      EXPECT_LE(largest - smallest, 1);
    }
  }
  EXPECT_THROW(even_part(5, 0, 0), Error);
  EXPECT_THROW(even_part(5, 2, 2), Error);
}

TEST(DistShard, LayoutClosedForm) {
  // 784·3 = 2352 (aligned), 3 -> 2368, 10 -> 2400; end 2410, padded to 32·2 = 64 -> 2432.
  const std::vector<std::int64_t> sizes = {2352, 3, 10};
  const FlatLayout l = flat_layout(sizes, 32, 2);
  EXPECT_EQ(l.offsets, (std::vector<std::int64_t>{0, 2368, 2400}));
  EXPECT_EQ(l.padded_size, 2432);
  EXPECT_EQ(l.shard_size, 1216);
  EXPECT_EQ(l.numel(), 2365);
  EXPECT_EQ(l.slice(1), (Range{1216, 2432}));
  // Rank 0 owns 1216 elements of param 0; rank 1 the other 1136 and all of params 1 and 2.
  EXPECT_EQ(l.pieces(l.slice(0)), (std::vector<Piece>{{0, 0, 0, 1216}}));
  EXPECT_EQ(l.pieces(l.slice(1)),
            (std::vector<Piece>{{0, 1216, 1216, 1136}, {1, 0, 2368, 3}, {2, 0, 2400, 10}}));
}

TEST(DistShard, EveryElementOwnedOnceForUnevenSizes) {
  const std::vector<std::vector<std::int64_t>> walks = {
      {7}, {1, 1, 1}, {33, 5, 0, 64, 31, 97}, {1000, 1, 999, 2}, {3, 100000, 7}};
  for (const auto& sizes : walks) {
    for (std::int64_t align : {1, 4, 32}) {
      for (int n = 1; n <= 5; ++n) {
        const FlatLayout l = flat_layout(sizes, align, n);
        SCOPED_TRACE(testing::Message()
                     << "params " << sizes.size() << " align " << align << " ranks " << n);
        EXPECT_EQ(l.padded_size % (align * n), 0);
        EXPECT_EQ(l.shard_size * n, l.padded_size);
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          EXPECT_EQ(l.offsets[i] % align, 0);
          if (i > 0) {
            EXPECT_GE(l.offsets[i], l.offsets[i - 1] + sizes[i - 1]);          // no overlap
            EXPECT_LT(l.offsets[i], l.offsets[i - 1] + sizes[i - 1] + align);  // minimal gap
          }
        }
        // Count, per parameter element, how many ranks claim it through pieces().
        std::vector<std::vector<int>> owners(sizes.size());
        for (std::size_t i = 0; i < sizes.size(); ++i) owners[i].assign(sizes[i], 0);
        std::int64_t owned_total = 0;
        for (int r = 0; r < n; ++r) {
          const Range s = l.slice(r);
          EXPECT_EQ(s.begin, r * l.shard_size);
          EXPECT_EQ(s.begin % align, 0);
          for (const Piece& p : l.pieces(s)) {
            EXPECT_GT(p.count, 0);
            EXPECT_GE(p.flat_begin, s.begin);
            EXPECT_LE(p.flat_begin + p.count, s.end);
            EXPECT_EQ(p.flat_begin, l.offsets[p.param] + p.param_begin);
            for (std::int64_t j = 0; j < p.count; ++j) ++owners[p.param][p.param_begin + j];
          }
          owned_total += l.numel_in(s);
        }
        EXPECT_EQ(owned_total, l.numel());
        for (const auto& per_param : owners) {
          for (int count : per_param) ASSERT_EQ(count, 1);
        }
        // Padding stays small: below one alignment per parameter plus one alignment per rank.
        EXPECT_LT(l.padded_size - l.numel(),
                  align * static_cast<std::int64_t>(sizes.size() + 1) + align * n);
      }
    }
  }
}

TEST(DistShard, PiecesOfArbitraryRangeCutThroughParams) {
  const std::vector<std::int64_t> sizes = {10, 0, 5, 20};
  const FlatLayout l = flat_layout(sizes, 8, 3);  // offsets 0, 16, 16, 24; end 44 -> 48
  EXPECT_EQ(l.offsets, (std::vector<std::int64_t>{0, 16, 16, 24}));
  EXPECT_EQ(l.pieces({5, 30}), (std::vector<Piece>{{0, 5, 5, 5}, {2, 0, 16, 5}, {3, 0, 24, 6}}));
  EXPECT_TRUE(l.pieces({10, 16}).empty());  // padding only
  EXPECT_EQ(l.numel_in({0, 48}), 35);
}

TEST(DistShard, EmptyWalkAndBadArguments) {
  const FlatLayout l = flat_layout({}, 32, 3);
  EXPECT_EQ(l.padded_size, 0);
  EXPECT_TRUE(l.slice(2).empty());
  EXPECT_EQ(l.numel(), 0);
  EXPECT_TRUE(l.pieces(l.slice(2)).empty());
  const std::vector<std::int64_t> sizes = {4};
  EXPECT_THROW(flat_layout(sizes, 0, 2), Error);
  EXPECT_THROW(flat_layout(sizes, 32, 0), Error);
  EXPECT_THROW(l.slice(3), Error);
}

TEST(DistShard, ShardedLayoutPerUnit) {
  // Units {0,1}, {} (a parameterless leaf), {2}: each padded to 8·2 on its own.
  const std::vector<std::int64_t> sizes = {10, 3, 20};
  const std::vector<std::size_t> units = {2, 0, 1};
  const ShardedLayout l = sharded_layout(sizes, units, 8, 2);
  ASSERT_EQ(l.unit_count(), 3u);
  EXPECT_EQ(l.units[0].padded_size, 32);  // 10 -> 16, +3 = 19 -> 32
  EXPECT_EQ(l.units[1].padded_size, 0);
  EXPECT_EQ(l.units[2].padded_size, 32);
  EXPECT_EQ(l.full_offset, (std::vector<std::int64_t>{0, 32, 32}));
  EXPECT_EQ(l.shard_offset, (std::vector<std::int64_t>{0, 16, 16}));
  EXPECT_EQ(l.full_size, 64);
  EXPECT_EQ(l.shard_size, 32);
  EXPECT_EQ(l.max_unit_size, 32);
  EXPECT_EQ(l.numel(), 33);
  EXPECT_EQ(l.max_unit_numel(), 20);
  EXPECT_EQ(l.unit_of(0), 0u);
  EXPECT_EQ(l.unit_of(1), 0u);
  EXPECT_EQ(l.unit_of(2), 2u);  // not the empty unit 1
  EXPECT_EQ(l.full_offset_of(1), 16);
  EXPECT_EQ(l.full_offset_of(2), 32);
  const std::vector<std::size_t> wrong = {1, 1};
  EXPECT_THROW(sharded_layout(sizes, wrong, 8, 2), Error);
}

TEST(DistShard, ShardedLayoutOwnsEveryElementOnce) {
  const std::vector<std::int64_t> sizes = {33, 5, 64, 31, 97, 1, 2};
  const std::vector<std::size_t> units = {2, 1, 0, 3, 1};
  for (int n = 1; n <= 5; ++n) {
    const ShardedLayout l = sharded_layout(sizes, units, 4, n);
    std::int64_t owned = 0;
    for (std::size_t u = 0; u < l.unit_count(); ++u) {
      EXPECT_EQ(l.units[u].shard_size * n, l.units[u].padded_size);
      for (int r = 0; r < n; ++r) owned += l.units[u].numel_in(l.units[u].slice(r));
    }
    EXPECT_EQ(owned, l.numel());
    EXPECT_EQ(l.shard_size * n, l.full_size);
  }
}

}  // namespace
}  // namespace noeira::dist
