#pragma once
// Collective checks shared by the simulated tests (gtest) and the MPI driver (mpiexec), in the
// style of nccl-tests: inputs crafted so the exact result is known, compared exactly, and the
// return value is the number of wrong elements on this rank (0 = pass).
#include <cstdint>
#include <vector>

#include "distributed/process_group.hpp"

namespace noeira::dist::checks {

// Small integers: every sum below is exact in fp32, so any correct order gives these bits.
inline float value(int rank, std::int64_t i) {
  return static_cast<float>(rank * 131 + static_cast<int>(i % 97) - 40);
}

inline std::int64_t count_wrong(const std::vector<float>& got, const std::vector<float>& want) {
  std::int64_t wrong = got.size() == want.size() ? 0 : 1;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    // Bitwise via ==: the values are exact, and -0.0 never occurs.
    if (!(got[i] == want[i])) ++wrong;
  }
  return wrong;
}

inline std::int64_t check_allreduce(ProcessGroup& pg, std::int64_t n) {
  std::vector<float> buf(static_cast<std::size_t>(n)), want(buf.size(), 0.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    buf[static_cast<std::size_t>(i)] = value(pg.rank(), i);
    for (int r = 0; r < pg.size(); ++r) want[static_cast<std::size_t>(i)] += value(r, i);
  }
  pg.allreduce(buf).wait();
  return count_wrong(buf, want);
}

// in_place: the output is this rank's segment of the input buffer (the ZeRO-1 gradient reduce).
inline std::int64_t check_reduce_scatter(ProcessGroup& pg, std::int64_t n, bool in_place) {
  const std::int64_t total = n * pg.size();
  std::vector<float> in(static_cast<std::size_t>(total)), out(static_cast<std::size_t>(n), -7.0f);
  for (std::int64_t j = 0; j < total; ++j) in[static_cast<std::size_t>(j)] = value(pg.rank(), j);
  std::vector<float> want(out.size(), 0.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    for (int r = 0; r < pg.size(); ++r) {
      want[static_cast<std::size_t>(i)] += value(r, pg.rank() * n + i);
    }
  }
  if (in_place) {
    std::span<float> mine(in.data() + pg.rank() * n, static_cast<std::size_t>(n));
    pg.reduce_scatter(in, mine).wait();
    out.assign(mine.begin(), mine.end());
  } else {
    pg.reduce_scatter(in, out).wait();
  }
  return count_wrong(out, want);
}

// in_place: the input is this rank's segment of the output buffer (the ZeRO parameter gather).
inline std::int64_t check_all_gather(ProcessGroup& pg, std::int64_t n, bool in_place) {
  const std::size_t seg = static_cast<std::size_t>(n);
  std::vector<float> in(seg), out(seg * static_cast<std::size_t>(pg.size()), -7.0f),
      want(out.size());
  for (std::int64_t i = 0; i < n; ++i) in[static_cast<std::size_t>(i)] = value(pg.rank(), i);
  for (int q = 0; q < pg.size(); ++q) {
    for (std::int64_t i = 0; i < n; ++i) want[q * seg + static_cast<std::size_t>(i)] = value(q, i);
  }
  if (in_place) {
    std::span<float> mine(out.data() + pg.rank() * seg, seg);
    std::copy(in.begin(), in.end(), mine.begin());
    pg.all_gather(mine, out).wait();
  } else {
    pg.all_gather(in, out).wait();
  }
  return count_wrong(out, want);
}

inline std::int64_t check_broadcast(ProcessGroup& pg, std::int64_t n, int root) {
  std::vector<float> buf(static_cast<std::size_t>(n)), want(buf.size());
  for (std::int64_t i = 0; i < n; ++i) {
    buf[static_cast<std::size_t>(i)] = value(pg.rank(), i);
    want[static_cast<std::size_t>(i)] = value(root, i);
  }
  pg.broadcast(buf, root).wait();
  return count_wrong(buf, want);
}

// Several ops in flight at once, waited for in reverse order: the async contract.
inline std::int64_t check_overlapped(ProcessGroup& pg, std::int64_t n) {
  std::vector<std::vector<float>> bufs(3, std::vector<float>(static_cast<std::size_t>(n)));
  std::vector<float> want(static_cast<std::size_t>(n), 0.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    for (int r = 0; r < pg.size(); ++r) want[static_cast<std::size_t>(i)] += value(r, i);
  }
  std::vector<Work> works;
  for (std::size_t b = 0; b < bufs.size(); ++b) {
    for (std::int64_t i = 0; i < n; ++i) bufs[b][static_cast<std::size_t>(i)] = value(pg.rank(), i);
    works.push_back(pg.allreduce(bufs[b]));
  }
  for (std::size_t b = works.size(); b-- > 0;) works[b].wait();
  std::int64_t wrong = 0;
  for (const auto& b : bufs) wrong += count_wrong(b, want);
  for (Work& w : works) wrong += w.is_completed() ? 0 : 1;
  return wrong;
}

// Runs every check over sizes that do not divide evenly; returns wrong elements on this rank.
inline std::int64_t check_all(ProcessGroup& pg) {
  std::int64_t wrong = 0;
  for (std::int64_t n : {0, 1, 7, 1000, 65537}) {
    wrong += check_allreduce(pg, n);
    wrong += check_reduce_scatter(pg, n, false);
    wrong += check_reduce_scatter(pg, n, true);
    wrong += check_all_gather(pg, n, false);
    wrong += check_all_gather(pg, n, true);
    for (int root = 0; root < pg.size(); ++root) wrong += check_broadcast(pg, n, root);
    wrong += check_overlapped(pg, n);
  }
  pg.barrier().wait();
  return wrong;
}

}  // namespace noeira::dist::checks
