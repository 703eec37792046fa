// What --reduce-dtype bf16 buys per gradient reduction: our MPI process group's allreduce and
// reduce-scatter of an fp32 gradient sent as fp32, against the same gradient sent as bf16 the way
// distributed/grad_reducer.cpp does it (rounded into a staging buffer, reduced in bf16 with fp32
// accumulation, widened back: the conversions are timed with the op), and against raw MPI's fp32
// MPI_Allreduce / MPI_Reduce_scatter_block. Runs under mpirun and owns MPI
// (benchmarks/reduce_dtype.sh).
//
// Sizes are the fp32 gradient, 1 to 64 MiB. Per iteration: inputs reset and a barrier, untimed;
// the op timed; its result checked, untimed (small integers: every sum is exact in bf16 as in
// fp32 up to 4 ranks, so both wires give the same exact result). Time = the slowest rank's,
// median over iterations; the three sides alternate iteration by iteration. Also printed: the
// bytes this rank handed to the collectives (the funnel's tally) and memcpy's GB/s for the size.
//
//   mpirun -np 2 bench_reduce_dtype [--max-bytes B]
// Exit code 1 when an element was wrong on any rank.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "distributed/mpi_process_group.hpp"
#include "kernels/kernel_table.hpp"

namespace {

using namespace noeira;
using namespace noeira::dist;

constexpr std::int64_t kMiB = 1 << 20;
constexpr int kWarmup = 3;

float value(int rank, std::int64_t i) { return static_cast<float>((i * 7 + rank * 13) % 61 - 30); }

int iterations(std::int64_t bytes) {
  return static_cast<int>(std::clamp<std::int64_t>((std::int64_t{128} * kMiB) / bytes, 10, 100));
}

double slowest_median(std::vector<double> times) {
  MPI_Allreduce(MPI_IN_PLACE, times.data(), static_cast<int>(times.size()), MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double memcpy_gbps(std::int64_t bytes, int iters) {
  std::vector<char> from(static_cast<std::size_t>(bytes), 1), to(static_cast<std::size_t>(bytes));
  std::vector<double> times(static_cast<std::size_t>(iters));
  for (int it = -kWarmup; it < iters; ++it) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    std::memcpy(to.data(), from.data(), from.size());
    if (it >= 0) times[static_cast<std::size_t>(it)] = MPI_Wtime() - t0;
  }
  return static_cast<double>(bytes) / slowest_median(times) / 1e9;
}

struct Side {
  Side(const char* n, std::function<void()> f) : name(n), op(std::move(f)) {}
  const char* name;
  std::function<void()> op;
  std::vector<double> times;
  std::int64_t bytes = 0;  // handed to the collectives per op (tally)
};

}  // namespace

int main(int argc, char** argv) {
  try {
    MpiRuntime mpi(&argc, &argv);
    std::int64_t max_bytes = 64 * kMiB;
    for (int i = 1; i + 1 < argc; i += 2) {
      if (std::string(argv[i]) == "--max-bytes") max_bytes = std::atoll(argv[i + 1]);
    }
    auto pg = make_mpi_process_group();
    const int rank = pg->rank(), ranks = pg->size();
    if (ranks > 4) {
      if (rank == 0) std::fprintf(stderr, "bench_reduce_dtype: at most 4 ranks (exact sums)\n");
      return 2;
    }
    const KernelTable& k = kernels_for(Target::Cpu);
    long long wrong = 0;
    if (rank == 0) {
      std::printf("bench_reduce_dtype: %d ranks, %s; median of the slowest rank; bf16 includes "
                  "the conversions\n",
                  ranks, pg->backend().data());
      std::printf("%-15s %8s | %10s %10s %10s | %9s %9s | %11s %11s | %7s\n", "op", "size",
                  "fp32 us", "bf16 us", "raw us", "fp32/bf16", "raw/bf16", "fp32 bytes",
                  "bf16 bytes", "memcpy");
    }
    for (std::int64_t bytes = kMiB; bytes <= max_bytes; bytes *= 4) {
      const std::int64_t n = bytes / 4 / ranks * ranks;  // divisible for the reduce-scatter
      const std::int64_t shard = n / ranks;
      std::vector<float> grad(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(shard));
      std::vector<std::uint16_t> wire(static_cast<std::size_t>(n));
      for (const bool scatter : {false, true}) {
        auto reset = [&] {
          for (std::int64_t i = 0; i < n; ++i) grad[static_cast<std::size_t>(i)] = value(rank, i);
        };
        auto check = [&](const float* got, std::int64_t count, std::int64_t first) {
          for (std::int64_t i = 0; i < count; ++i) {
            float want = 0;
            for (int r = 0; r < ranks; ++r) want += value(r, first + i);
            if (got[i] != want) ++wrong;
          }
        };
        const std::span<float> whole(grad), mine(grad.data() + rank * shard,
                                                 static_cast<std::size_t>(shard));
        const std::span<std::uint16_t> staged(wire),
            staged_mine(wire.data() + rank * shard, static_cast<std::size_t>(shard));
        std::vector<Side> sides;
        sides.emplace_back("fp32", [&] {
                           if (scatter) pg->reduce_scatter(whole, mine).wait();
                           else pg->allreduce(whole).wait();
                         });
        sides.emplace_back("bf16", [&] {
                           k.to_bf16(nullptr, wire.data(), grad.data(), n);
                           if (scatter) {
                             pg->reduce_scatter(staged, staged_mine).wait();
                             k.from_bf16(nullptr, GradMode::Overwrite, mine.data(),
                                         staged_mine.data(), shard);
                           } else {
                             pg->allreduce(staged).wait();
                             k.from_bf16(nullptr, GradMode::Overwrite, grad.data(), wire.data(), n);
                           }
                         });
        sides.emplace_back("raw", [&] {
                           if (scatter) {
                             MPI_Reduce_scatter_block(grad.data(), out.data(),
                                                      static_cast<int>(shard), MPI_FLOAT, MPI_SUM,
                                                      MPI_COMM_WORLD);
                           } else {
                             MPI_Allreduce(MPI_IN_PLACE, grad.data(), static_cast<int>(n),
                                           MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                           }
                         });
        const int iters = iterations(bytes);
        for (int it = -kWarmup; it < iters; ++it) {
          for (Side& s : sides) {
            reset();
            pg->reset_tally();
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            s.op();
            const double t = MPI_Wtime() - t0;
            const bool raw = std::string(s.name) == "raw";
            if (scatter) {
              check(raw ? out.data() : mine.data(), shard, rank * shard);
            } else {
              check(grad.data(), n, 0);
            }
            const CollectiveTally& tally = pg->tally();
            s.bytes = tally.bytes_of(scatter ? Collective::ReduceScatter : Collective::AllReduce);
            if (it >= 0) s.times.push_back(t);
          }
        }
        const double fp32 = slowest_median(sides[0].times), bf16 = slowest_median(sides[1].times),
                     raw = slowest_median(sides[2].times);
        const double copy = memcpy_gbps(bytes, std::min(iters, 20));
        if (rank == 0) {
          std::printf("%-15s %5lld MiB | %10.1f %10.1f %10.1f | %8.2fx %8.2fx | %11lld %11lld | "
                      "%5.1f GB/s\n",
                      scatter ? "reduce_scatter" : "allreduce",
                      static_cast<long long>(bytes / kMiB), fp32 * 1e6, bf16 * 1e6, raw * 1e6,
                      fp32 / bf16, raw / bf16, static_cast<long long>(sides[0].bytes),
                      static_cast<long long>(sides[1].bytes), copy);
        }
      }
    }
    long long total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && total > 0) std::printf("bench_reduce_dtype: %lld wrong elements\n", total);
    return total == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_reduce_dtype: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
