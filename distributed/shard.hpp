#pragma once
// Shard arithmetic: the one place that turns the parameter walk into a flat, padded index space
// and cuts it into per-rank slices. Every policy, checkpoint writer and test asks this file;
// nobody else computes an offset.
//
// Layout: parameters in walk order, each starting at a multiple of `alignment` elements. The
// total is padded up to a multiple of alignment·N, so the N slices are equal, contiguous and each
// starts aligned. A slice may cut through a parameter; padding elements belong to no parameter.
// All sizes are element counts.
#include <cstdint>
#include <span>
#include <vector>

namespace noeira::dist {

// A half-open range [begin, end) of flat element indices.
struct Range {
  std::int64_t begin = 0;
  std::int64_t end = 0;

  std::int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  friend bool operator==(const Range&, const Range&) = default;
};

// n elements of a flat buffer from `data`: how the policies hand parts of the store's buffers to
// the collectives.
template <class T>
std::span<T> flat_span(T* data, std::int64_t n) {
  return {data, static_cast<std::size_t>(n)};
}

// The overlap of two ranges (empty, with begin == end, when they do not meet).
Range intersect(Range a, Range b);

// Part `index` of [0, count) cut into `parts` contiguous parts as even as the count allows: the
// first count % parts parts hold one element more; with count < parts the last parts are empty.
// What a collective that needs no padding (the MPI allreduce's per-rank chunks) cuts by.
Range even_part(std::int64_t count, int parts, int index);

// One parameter's share of a flat range: elements [param_begin, param_begin + count) of
// parameter `param` sit at flat indices [flat_begin, flat_begin + count).
struct Piece {
  std::size_t param = 0;
  std::int64_t param_begin = 0;
  std::int64_t flat_begin = 0;
  std::int64_t count = 0;
  friend bool operator==(const Piece&, const Piece&) = default;
};

struct FlatLayout {
  std::vector<std::int64_t> sizes;    // [params] element count of each parameter, walk order
  std::vector<std::int64_t> offsets;  // [params] aligned flat offset of each parameter
  std::int64_t alignment = 1;
  int ranks = 1;
  std::int64_t padded_size = 0;  // multiple of alignment·ranks
  std::int64_t shard_size = 0;   // padded_size / ranks: every slice has this size

  std::size_t param_count() const { return sizes.size(); }
  // Elements that belong to parameters (Ψ), without padding.
  std::int64_t numel() const;
  // Parameter i's flat range.
  Range param_range(std::size_t i) const;
  // Rank r's slice [r·shard_size, (r+1)·shard_size).
  Range slice(int rank) const;
  // The parameter pieces inside a flat range, in walk order (padding skipped).
  std::vector<Piece> pieces(Range flat) const;
  // Parameter elements (not padding) inside a flat range.
  std::int64_t numel_in(Range flat) const;
};

// Builds the layout of parameters of the given sizes (walk order) for `ranks` ranks. Sizes must
// be >= 0, alignment >= 1, ranks >= 1; a total not divisible by ranks is padded, never an error.
// A walk without elements has an empty layout (padded_size 0).
FlatLayout flat_layout(std::span<const std::int64_t> sizes, std::int64_t alignment, int ranks);

// The walk cut into units (the top-level children of a Sequential: what ZeRO-3 gathers at once),
// each unit laid out and sharded on its own: rank r owns slice r of every unit. Per-unit slices,
// rather than one slice of the whole walk, are what let a unit be reduce-scattered or gathered
// with equal counts on every rank as soon as its vjp is done. With one unit this is flat_layout.
//
// Full buffer: the units' padded ranges one after another. Shard buffer (rank r): rank r's slice
// of unit 0, then of unit 1, ... Every rank's shard buffer has the same size.
struct ShardedLayout {
  std::vector<FlatLayout> units;           // [units] each unit's layout, unit-local offsets
  std::vector<std::size_t> first_param;    // [units + 1] walk index of each unit's first param
  std::vector<std::int64_t> full_offset;   // [units] unit start in the full buffer
  std::vector<std::int64_t> shard_offset;  // [units] unit slice start in a shard buffer
  std::int64_t full_size = 0;
  std::int64_t shard_size = 0;
  std::int64_t max_unit_size = 0;  // largest padded unit: the gather / transient buffer size
  int ranks = 1;

  std::size_t unit_count() const { return units.size(); }
  // Elements that belong to parameters (Ψ), and to the largest unit.
  std::int64_t numel() const;
  std::int64_t max_unit_numel() const;
  // The unit a parameter (walk index) belongs to, and its offset in the full buffer.
  std::size_t unit_of(std::size_t param) const;
  std::int64_t full_offset_of(std::size_t param) const;
};

// unit_params[u] = number of parameters (walk order) in unit u; they must add up to sizes.size().
ShardedLayout sharded_layout(std::span<const std::int64_t> sizes,
                             std::span<const std::size_t> unit_params, std::int64_t alignment,
                             int ranks);

}  // namespace noeira::dist
