#include "distributed/shard.hpp"

#include <algorithm>

#include "kernels/error.hpp"

namespace noeira::dist {

namespace {
std::int64_t round_up(std::int64_t x, std::int64_t multiple) {
  return (x + multiple - 1) / multiple * multiple;
}
}  // namespace

Range intersect(Range a, Range b) {
  const std::int64_t begin = std::max(a.begin, b.begin);
  const std::int64_t end = std::min(a.end, b.end);
  return end > begin ? Range{begin, end} : Range{begin, begin};
}

Range even_part(std::int64_t count, int parts, int index) {
  NOEIRA_CHECK(count >= 0 && parts >= 1 && index >= 0 && index < parts, "even_part: part ", index,
               " of ", parts, " of ", count, " elements");
  const std::int64_t base = count / parts;
  const std::int64_t longer = count % parts;  // the parts holding base + 1
  const std::int64_t begin = index * base + std::min<std::int64_t>(index, longer);
  return {begin, begin + base + (index < longer ? 1 : 0)};
}

std::int64_t FlatLayout::numel() const {
  std::int64_t n = 0;
  for (std::int64_t s : sizes) n += s;
  return n;
}

Range FlatLayout::param_range(std::size_t i) const {
  NOEIRA_CHECK(i < sizes.size(), "flat layout: parameter index ", i, " out of ", sizes.size());
  return {offsets[i], offsets[i] + sizes[i]};
}

Range FlatLayout::slice(int rank) const {
  NOEIRA_CHECK(rank >= 0 && rank < ranks, "flat layout: rank ", rank, " out of ", ranks);
  return {rank * shard_size, (rank + 1) * shard_size};
}

std::vector<Piece> FlatLayout::pieces(Range flat) const {
  std::vector<Piece> out;
  // Offsets increase with the walk, so the first parameter ending after flat.begin is found by
  // binary search; the loop then stops at the first one starting at or after flat.end.
  auto first = std::upper_bound(offsets.begin(), offsets.end(), flat.begin);
  std::size_t i =
      first == offsets.begin() ? 0 : static_cast<std::size_t>(first - offsets.begin()) - 1;
  for (; i < sizes.size() && offsets[i] < flat.end; ++i) {
    const Range overlap = intersect(flat, param_range(i));
    if (overlap.empty()) continue;
    out.push_back({i, overlap.begin - offsets[i], overlap.begin, overlap.size()});
  }
  return out;
}

std::int64_t FlatLayout::numel_in(Range flat) const {
  std::int64_t n = 0;
  for (const Piece& p : pieces(flat)) n += p.count;
  return n;
}

FlatLayout flat_layout(std::span<const std::int64_t> sizes, std::int64_t alignment, int ranks) {
  NOEIRA_CHECK(alignment >= 1, "flat layout: alignment must be >= 1, got ", alignment);
  NOEIRA_CHECK(ranks >= 1, "flat layout: ranks must be >= 1, got ", ranks);
  FlatLayout layout;
  layout.alignment = alignment;
  layout.ranks = ranks;
  layout.sizes.assign(sizes.begin(), sizes.end());
  layout.offsets.reserve(sizes.size());
  std::int64_t cursor = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    NOEIRA_CHECK(sizes[i] >= 0, "flat layout: parameter ", i, " has negative size ", sizes[i]);
    cursor = round_up(cursor, alignment);
    layout.offsets.push_back(cursor);
    cursor += sizes[i];
  }
  // Padding to alignment·ranks (not just ranks) keeps every slice start aligned, so a shard
  // buffer is as vector-friendly as a parameter.
  layout.padded_size = round_up(cursor, alignment * ranks);
  layout.shard_size = layout.padded_size / ranks;
  return layout;
}

std::int64_t ShardedLayout::numel() const {
  std::int64_t n = 0;
  for (const FlatLayout& u : units) n += u.numel();
  return n;
}

std::int64_t ShardedLayout::max_unit_numel() const {
  std::int64_t n = 0;
  for (const FlatLayout& u : units) n = std::max(n, u.numel());
  return n;
}

std::size_t ShardedLayout::unit_of(std::size_t param) const {
  NOEIRA_CHECK(param < first_param.back(), "sharded layout: parameter ", param, " out of ",
               first_param.back());
  // The last unit whose first parameter is <= param (empty units share a first_param).
  const auto it = std::upper_bound(first_param.begin(), first_param.end(), param);
  return static_cast<std::size_t>(it - first_param.begin()) - 1;
}

std::int64_t ShardedLayout::full_offset_of(std::size_t param) const {
  const std::size_t u = unit_of(param);
  return full_offset[u] + units[u].offsets[param - first_param[u]];
}

ShardedLayout sharded_layout(std::span<const std::int64_t> sizes,
                             std::span<const std::size_t> unit_params, std::int64_t alignment,
                             int ranks) {
  std::size_t total = 0;
  for (std::size_t n : unit_params) total += n;
  NOEIRA_CHECK(total == sizes.size(), "sharded layout: units hold ", total,
               " parameters, walk has ", sizes.size());
  ShardedLayout layout;
  layout.ranks = ranks;
  layout.first_param.push_back(0);
  for (std::size_t count : unit_params) {
    const std::size_t first = layout.first_param.back();
    layout.units.push_back(flat_layout(sizes.subspan(first, count), alignment, ranks));
    layout.first_param.push_back(first + count);
    layout.full_offset.push_back(layout.full_size);
    layout.shard_offset.push_back(layout.shard_size);
    layout.full_size += layout.units.back().padded_size;
    layout.shard_size += layout.units.back().shard_size;
    layout.max_unit_size = std::max(layout.max_unit_size, layout.units.back().padded_size);
  }
  return layout;
}

}  // namespace noeira::dist
