#pragma once
// Collective checks shared by the simulated tests (gtest) and the MPI driver (mpiexec), in the
// style of nccl-tests: inputs crafted so the exact result is known, compared exactly, and the
// return value is the number of wrong elements on this rank (0 = pass).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "distributed/collective_tensor.hpp"
#include "distributed/process_group.hpp"
#include "kernels/bf16_math.hpp"

namespace noeira::dist::checks {

// Every sum below is exact in its type, so any correct order gives these bits. fp32: small
// integers. fp64: plus a fraction fp32 cannot hold (2^-30 steps), so a double that travelled as
// a float would come out wrong. int64: beyond 2^32 and 2^24, so neither int32 nor fp32 could carry
// it. int32: negative and positive small integers.
template <class T = float>
T value(int rank, std::int64_t i) {
  const std::int64_t small = rank * 131 + i % 97 - 40;
  if constexpr (std::is_same_v<T, double>) {
    return static_cast<double>(small) + std::ldexp(static_cast<double>(rank + 1), -30);
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return (std::int64_t{rank + 1} << 40) + small;
  } else {
    return static_cast<T>(small);
  }
}

// Where a check's op buffers live: ordinary memory, or the group's shared memory
// (ProcessGroup::shared_memory: over MPI on one node, the ops read such buffers in place; a
// group without any gives ordinary memory for both).
enum class Memory : std::uint8_t { Private, Shared };

// n elements of T in host memory, each `fill`, in `memory`. Allocating one is collective when
// Shared.
template <class T>
class OpBuffer {
 public:
  OpBuffer(ProcessGroup& pg, std::size_t n, Memory memory, T fill = T{})
      : tensor_(memory == Memory::Shared
                    ? collective_tensor(pg, {static_cast<std::int64_t>(n)}, Target::Cpu, dtype_of<T>)
                    : Tensor({static_cast<std::int64_t>(n)}, Target::Cpu, dtype_of<T>)),
        span_(tensor_.as<T>(), n) {
    std::fill(span_.begin(), span_.end(), fill);
  }
  std::span<T> span() const { return span_; }
  T* data() const { return span_.data(); }
  std::size_t size() const { return span_.size(); }
  T& operator[](std::size_t i) const { return span_[i]; }
  std::vector<T> to_vector() const { return {span_.begin(), span_.end()}; }

 private:
  Tensor tensor_;
  std::span<T> span_;
};

template <class T>
std::int64_t count_wrong(const std::vector<T>& got, const std::vector<T>& want) {
  std::int64_t wrong = got.size() == want.size() ? 0 : 1;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    // Bitwise via ==: the values are exact, and -0.0 never occurs.
    if (!(got[i] == want[i])) ++wrong;
  }
  return wrong;
}

template <class T = float>
std::int64_t check_allreduce(ProcessGroup& pg, std::int64_t n, Memory memory = Memory::Private) {
  OpBuffer<T> buf(pg, static_cast<std::size_t>(n), memory);
  std::vector<T> want(buf.size(), T{0});
  for (std::int64_t i = 0; i < n; ++i) {
    buf[static_cast<std::size_t>(i)] = value<T>(pg.rank(), i);
    for (int r = 0; r < pg.size(); ++r) want[static_cast<std::size_t>(i)] += value<T>(r, i);
  }
  pg.allreduce(buf.span()).wait();
  return count_wrong(buf.to_vector(), want);
}

// in_place: the output is this rank's segment of the input buffer (the ZeRO-1 gradient reduce).
template <class T = float>
std::int64_t check_reduce_scatter(ProcessGroup& pg, std::int64_t n, bool in_place,
                                  Memory memory = Memory::Private) {
  const std::int64_t total = n * pg.size();
  OpBuffer<T> in(pg, static_cast<std::size_t>(total), memory);
  std::vector<T> out(static_cast<std::size_t>(n), T{-7});
  for (std::int64_t j = 0; j < total; ++j) in[static_cast<std::size_t>(j)] = value<T>(pg.rank(), j);
  std::vector<T> want(out.size(), T{0});
  for (std::int64_t i = 0; i < n; ++i) {
    for (int r = 0; r < pg.size(); ++r) {
      want[static_cast<std::size_t>(i)] += value<T>(r, pg.rank() * n + i);
    }
  }
  if (in_place) {
    std::span<T> mine(in.data() + pg.rank() * n, static_cast<std::size_t>(n));
    pg.reduce_scatter(in.span(), mine).wait();
    out.assign(mine.begin(), mine.end());
  } else {
    pg.reduce_scatter(in.span(), out).wait();
  }
  return count_wrong(out, want);
}

// in_place: the input is this rank's segment of the output buffer (the ZeRO parameter gather).
template <class T = float>
std::int64_t check_all_gather(ProcessGroup& pg, std::int64_t n, bool in_place,
                              Memory memory = Memory::Private) {
  const std::size_t seg = static_cast<std::size_t>(n);
  const std::size_t whole = seg * static_cast<std::size_t>(pg.size());
  // The output in `memory` (the shared-memory path writes every rank's input into it).
  OpBuffer<T> in(pg, seg, Memory::Private);
  OpBuffer<T> out(pg, whole, memory, T{-7});
  std::vector<T> want(whole);
  for (std::int64_t i = 0; i < n; ++i) in[static_cast<std::size_t>(i)] = value<T>(pg.rank(), i);
  for (int q = 0; q < pg.size(); ++q) {
    for (std::int64_t i = 0; i < n; ++i) want[q * seg + static_cast<std::size_t>(i)] = value<T>(q, i);
  }
  if (in_place) {
    std::span<T> mine(out.data() + pg.rank() * seg, seg);
    std::copy(in.data(), in.data() + seg, mine.begin());
    pg.all_gather(mine, out.span()).wait();
  } else {
    pg.all_gather(in.span(), out.span()).wait();
  }
  return count_wrong(out.to_vector(), want);
}

template <class T = float>
std::int64_t check_broadcast(ProcessGroup& pg, std::int64_t n, int root) {
  std::vector<T> buf(static_cast<std::size_t>(n)), want(buf.size());
  for (std::int64_t i = 0; i < n; ++i) {
    buf[static_cast<std::size_t>(i)] = value<T>(pg.rank(), i);
    want[static_cast<std::size_t>(i)] = value<T>(root, i);
  }
  pg.broadcast(buf, root).wait();
  return count_wrong(buf, want);
}

// Several ops in flight at once, waited for in reverse order: the async contract.
template <class T = float>
std::int64_t check_overlapped(ProcessGroup& pg, std::int64_t n, Memory memory = Memory::Private) {
  std::vector<OpBuffer<T>> bufs;
  for (int b = 0; b < 3; ++b) bufs.emplace_back(pg, static_cast<std::size_t>(n), memory);
  std::vector<T> want(static_cast<std::size_t>(n), T{0});
  for (std::int64_t i = 0; i < n; ++i) {
    for (int r = 0; r < pg.size(); ++r) want[static_cast<std::size_t>(i)] += value<T>(r, i);
  }
  std::vector<Work> works;
  for (std::size_t b = 0; b < bufs.size(); ++b) {
    for (std::int64_t i = 0; i < n; ++i) bufs[b][static_cast<std::size_t>(i)] = value<T>(pg.rank(), i);
    works.push_back(pg.allreduce(bufs[b].span()));
  }
  for (std::size_t b = works.size(); b-- > 0;) works[b].wait();
  std::int64_t wrong = 0;
  for (const auto& b : bufs) wrong += count_wrong(b.to_vector(), want);
  for (Work& w : works) wrong += w.is_completed() ? 0 : 1;
  return wrong;
}

// Order-sensitive values: floats of mixed signs and magnitudes 2^-20 .. 2^20 (a hash of rank and
// index), so sums in different orders differ in their last bits; integers wrap-free.
template <class T>
T scrambled(int rank, std::int64_t i) {
  std::uint64_t h = (static_cast<std::uint64_t>(rank) << 40) ^ static_cast<std::uint64_t>(i);
  h = (h ^ (h >> 31)) * 0x9E3779B97F4A7C15ull;
  h = (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  if constexpr (std::is_floating_point_v<T>) {
    const T mantissa = static_cast<T>(h % 1000003) / T{1000003} + T{1};
    const int exponent = static_cast<int>((h >> 20) % 41) - 20;
    return (h >> 63 ? -1 : 1) * std::ldexp(mantissa, exponent);
  } else {
    return static_cast<T>(static_cast<std::int64_t>(h % 2000001) - 1000000);
  }
}

template <class T>
std::int64_t count_bits_differ(const T* got, const std::vector<T>& want) {
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) ++wrong;
  }
  return wrong;
}

// The sum over `ranks` ranks of value(r) in distributed/node_layout.hpp's order for nodes of
// `ranks_per_node` consecutive ranks (0: one node): each node's ranks left to right, then the
// nodes' sums left to right. On one node, the left fold in rank order.
template <class Acc, class Value>
Acc node_order_sum(int ranks, int ranks_per_node, Value value) {
  const int m = ranks_per_node > 0 ? ranks_per_node : ranks;
  Acc total{};
  for (int first = 0; first < ranks; first += m) {
    Acc part = value(first);
    for (int r = first + 1; r < std::min(ranks, first + m); ++r) part += value(r);
    total = first == 0 ? part : total + part;
  }
  return total;
}

// Allreduce and reduce-scatter (in and out of place) of scrambled values against the left fold
// ((x_0 + x_1) + x_2) + ... computed here from every rank's inputs: bit for bit, so any other
// order of additions (a tree, a ring) fails. The simulated backend's order, which every backend
// whose results must equal it (MPI) must follow; with ranks_per_node, the order of nodes of that
// many ranks (node_order_sum).
template <class T>
std::int64_t check_rank_order(ProcessGroup& pg, std::int64_t n, Memory memory = Memory::Private,
                              int ranks_per_node = 0) {
  const auto fold = [&](std::int64_t j) {
    return node_order_sum<T>(pg.size(), ranks_per_node,
                             [j](int r) { return scrambled<T>(r, j); });
  };
  const auto size = static_cast<std::size_t>(n);
  OpBuffer<T> buf(pg, size, memory);
  std::vector<T> want(size);
  for (std::int64_t i = 0; i < n; ++i) {
    buf[static_cast<std::size_t>(i)] = scrambled<T>(pg.rank(), i);
    want[static_cast<std::size_t>(i)] = fold(i);
  }
  pg.allreduce(buf.span()).wait();
  std::int64_t wrong = count_bits_differ(buf.data(), want);
  for (bool in_place : {false, true}) {
    OpBuffer<T> in(pg, size * static_cast<std::size_t>(pg.size()), memory);
    std::vector<T> out(size, T{-7});
    for (std::size_t j = 0; j < in.size(); ++j) {
      in[j] = scrambled<T>(pg.rank(), static_cast<std::int64_t>(j));
    }
    for (std::int64_t i = 0; i < n; ++i) {
      want[static_cast<std::size_t>(i)] = fold(pg.rank() * n + i);
    }
    std::span<T> mine(in.data() + pg.rank() * n, size);
    pg.reduce_scatter(in.span(), in_place ? mine : std::span<T>(out)).wait();
    wrong += count_bits_differ(in_place ? mine.data() : out.data(), want);
  }
  return wrong;
}

// The bf16 sums of process_group.hpp, the same way: bf16 inputs (scrambled values rounded)
// against bf16(((fp32(x_0) + fp32(x_1)) + ...)), bit for bit. A backend that adds in bf16 (NCCL's
// own bf16 sums round at every hop) or in another order fails at 3 ranks and more: the inputs'
// exponents span 2^±20, so most partial sums are not bf16 values.
inline std::int64_t check_rank_order_bf16(ProcessGroup& pg, std::int64_t n,
                                          Memory memory = Memory::Private,
                                          int ranks_per_node = 0) {
  using Bits = std::uint16_t;
  const auto input = [](int rank, std::int64_t j) { return bf16_bits(scrambled<float>(rank, j)); };
  const auto fold = [&](std::int64_t j) {
    return bf16_bits(node_order_sum<float>(pg.size(), ranks_per_node,
                                           [&](int r) { return bf16_value(input(r, j)); }));
  };
  const auto size = static_cast<std::size_t>(n);
  OpBuffer<Bits> buf(pg, size, memory);
  std::vector<Bits> want(size);
  for (std::int64_t i = 0; i < n; ++i) {
    buf[static_cast<std::size_t>(i)] = input(pg.rank(), i);
    want[static_cast<std::size_t>(i)] = fold(i);
  }
  pg.allreduce(buf.span()).wait();
  std::int64_t wrong = count_bits_differ(buf.data(), want);
  for (bool in_place : {false, true}) {
    OpBuffer<Bits> in(pg, size * static_cast<std::size_t>(pg.size()), memory);
    std::vector<Bits> out(size, Bits{7});
    for (std::size_t j = 0; j < in.size(); ++j) in[j] = input(pg.rank(), static_cast<std::int64_t>(j));
    for (std::int64_t i = 0; i < n; ++i) {
      want[static_cast<std::size_t>(i)] = fold(pg.rank() * n + i);
    }
    std::span<Bits> mine(in.data() + pg.rank() * n, size);
    pg.reduce_scatter(in.span(), in_place ? mine : std::span<Bits>(out)).wait();
    wrong += count_bits_differ(in_place ? mine.data() : out.data(), want);
  }
  // Moved, not summed: an all-gather and a broadcast keep every bit.
  std::vector<Bits> gathered(size * static_cast<std::size_t>(pg.size()));
  for (std::size_t i = 0; i < size; ++i) buf[i] = input(pg.rank(), static_cast<std::int64_t>(i));
  pg.all_gather(buf.span(), gathered).wait();
  for (int r = 0; r < pg.size(); ++r) {
    for (std::size_t i = 0; i < size; ++i) {
      if (gathered[static_cast<std::size_t>(r) * size + i] != input(r, static_cast<std::int64_t>(i))) {
        ++wrong;
      }
    }
  }
  pg.broadcast(buf.span(), pg.size() - 1).wait();
  for (std::size_t i = 0; i < size; ++i) {
    if (buf[i] != input(pg.size() - 1, static_cast<std::int64_t>(i))) ++wrong;
  }
  return wrong;
}

// Whether the bf16 check above can fail: at 3 ranks and more, summing in bf16 hop by hop gives
// other bits than the fp32 fold for some of its elements. Returns how many of n differ.
inline std::int64_t bf16_hops_differ(int ranks, std::int64_t n) {
  std::int64_t differ = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    float exact = bf16_value(bf16_bits(scrambled<float>(0, j)));
    float hops = exact;
    for (int r = 1; r < ranks; ++r) {
      const float x = bf16_value(bf16_bits(scrambled<float>(r, j)));
      exact += x;
      hops = round_to_bf16(hops + x);
    }
    if (bf16_bits(exact) != bf16_bits(hops)) ++differ;
  }
  return differ;
}

// Large allreduces and a broadcast in flight together, waited for in an order that differs
// between ranks (odd ranks backwards): a backend whose ops need a later step from this rank
// (mpi_ordered_sum.hpp's second phase) must take it while the rank waits for any other op, or
// this hangs until the watchdog ends it.
inline std::int64_t check_any_wait_order(ProcessGroup& pg, Memory memory = Memory::Private,
                                         int ranks_per_node = 0) {
  constexpr std::int64_t n = 65537;
  std::vector<OpBuffer<float>> bufs;
  for (int b = 0; b < 4; ++b) bufs.emplace_back(pg, static_cast<std::size_t>(n), memory);
  std::vector<float> want(static_cast<std::size_t>(n)), root(8);
  for (std::int64_t i = 0; i < n; ++i) {
    want[static_cast<std::size_t>(i)] = node_order_sum<float>(
        pg.size(), ranks_per_node, [i](int r) { return scrambled<float>(r, i); });
  }
  std::vector<Work> works;
  for (std::size_t b = 0; b < bufs.size(); ++b) {
    for (std::int64_t i = 0; i < n; ++i) {
      bufs[b][static_cast<std::size_t>(i)] = scrambled<float>(pg.rank(), i);
    }
    works.push_back(pg.allreduce(bufs[b].span()));
    if (b == 1) {
      std::fill(root.begin(), root.end(), static_cast<float>(pg.rank()));
      works.push_back(pg.broadcast(root, 0));
    }
  }
  if (pg.rank() % 2 == 1) std::reverse(works.begin(), works.end());
  for (Work& w : works) w.wait();
  std::int64_t wrong = 0;
  for (const auto& b : bufs) wrong += count_bits_differ(b.data(), want);
  for (float x : root) wrong += x == 0.0f ? 0 : 1;
  return wrong;
}

// check_rank_order of every element type at sizes around the rank count, an uneven middle size
// and one large enough for an allreduce in chunks (distributed/mpi_ordered_sum.hpp's two paths).
// The sizes include one past the shared-memory chunks (mpi_shared_sums.hpp: 0.5 MiB regions, an
// in-place allreduce's chunk a region per rank), so that the last chunk is a partial one.
inline std::int64_t check_rank_order_all(ProcessGroup& pg, Memory memory = Memory::Private,
                                         int ranks_per_node = 0) {
  std::int64_t wrong = 0;
  const std::int64_t n = pg.size();
  for (std::int64_t count : {std::int64_t{1}, std::int64_t{7}, n - 1, n + 1, std::int64_t{1003},
                             std::int64_t{65537}, std::int64_t{131072} * n + 3}) {
    if (count < 1) continue;
    wrong += check_rank_order<float>(pg, count, memory, ranks_per_node);
    wrong += check_rank_order<double>(pg, count, memory, ranks_per_node);
    wrong += check_rank_order<std::int32_t>(pg, count, memory, ranks_per_node);
    wrong += check_rank_order<std::int64_t>(pg, count, memory, ranks_per_node);
    wrong += check_rank_order_bf16(pg, count, memory, ranks_per_node);
  }
  return wrong + check_any_wait_order(pg, memory, ranks_per_node);
}

// Every check of one element type over sizes that do not divide evenly.
template <class T>
std::int64_t check_all_of(ProcessGroup& pg, std::initializer_list<std::int64_t> sizes,
                          Memory memory) {
  std::int64_t wrong = 0;
  for (std::int64_t n : sizes) {
    wrong += check_allreduce<T>(pg, n, memory);
    wrong += check_reduce_scatter<T>(pg, n, false, memory);
    wrong += check_reduce_scatter<T>(pg, n, true, memory);
    wrong += check_all_gather<T>(pg, n, false, memory);
    wrong += check_all_gather<T>(pg, n, true, memory);
    for (int root = 0; root < pg.size(); ++root) wrong += check_broadcast<T>(pg, n, root);
    wrong += check_overlapped<T>(pg, n, memory);
  }
  return wrong;
}

// Every check of every element type; returns wrong elements on this rank.
inline std::int64_t check_all(ProcessGroup& pg, Memory memory = Memory::Private) {
  std::int64_t wrong = check_all_of<float>(pg, {0, 1, 7, 1000, 65537}, memory);
  wrong += check_all_of<double>(pg, {1, 7, 1001}, memory);
  wrong += check_all_of<std::int64_t>(pg, {1, 7, 1001}, memory);
  wrong += check_all_of<std::int32_t>(pg, {1, 7, 1001}, memory);
  pg.barrier().wait();
  return wrong;
}

}  // namespace noeira::dist::checks
