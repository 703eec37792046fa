// The simulated backend: every collective for N = 1..4 with exactly known results, the fixed
// reduction order, the async contract, and fail-fast when a rank throws.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/tensor.hpp"
#include "dist_checks.hpp"
#include "distributed/host_collectives.hpp"
#include "distributed/sim_process_group.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {
namespace {

using namespace std::chrono_literals;

class DistSim : public ::testing::TestWithParam<int> {};

TEST_P(DistSim, EveryCollectiveExact) {
  std::vector<std::int64_t> wrong(static_cast<std::size_t>(GetParam()), -1);
  run_simulated(GetParam(), [&](ProcessGroup& pg) {
    EXPECT_EQ(pg.backend(), "simulated");
    EXPECT_EQ(pg.size(), GetParam());
    wrong[static_cast<std::size_t>(pg.rank())] = checks::check_all(pg);
  });
  for (std::size_t r = 0; r < wrong.size(); ++r) EXPECT_EQ(wrong[r], 0) << "rank " << r;
}

TEST_P(DistSim, SumsEqualTheLeftFoldBitForBit) {
  std::vector<std::int64_t> wrong(static_cast<std::size_t>(GetParam()), -1);
  run_simulated(GetParam(), [&](ProcessGroup& pg) {
    wrong[static_cast<std::size_t>(pg.rank())] = checks::check_rank_order_all(pg);
  });
  for (std::size_t r = 0; r < wrong.size(); ++r) EXPECT_EQ(wrong[r], 0) << "rank " << r;
}

TEST(DistSimBf16, TheBf16CheckTellsFp32AccumulationFromBf16Hops) {
  // check_rank_order_bf16 passes only an fp32 accumulation; a backend adding in bf16 hop by hop
  // would pass too if the data never told the two apart.
  EXPECT_EQ(checks::bf16_hops_differ(2, 1003), 0);  // one addition, one rounding: the same
  EXPECT_GT(checks::bf16_hops_differ(3, 1003), 20);
  EXPECT_GT(checks::bf16_hops_differ(5, 1003), 40);
}

TEST_P(DistSim, SumsInRankOrder) {
  // fp32 addition is not associative: (1 + 2^25) - 2^25 == 0 but 1 + (2^25 - 2^25) == 1. Rank 0
  // holds 1, rank 1 2^25, rank 2 -2^25, then zeros; the fixed order 0, 1, 2, ... must give 0.
  const int n = GetParam();
  std::vector<float> results(static_cast<std::size_t>(n), -1.0f);
  run_simulated(n, [&](ProcessGroup& pg) {
    const float mine[] = {1.0f, 33554432.0f, -33554432.0f, 0.0f};
    std::vector<float> buf(5, mine[pg.rank()]);
    pg.allreduce(buf).wait();
    std::vector<float> rs(1);
    pg.reduce_scatter(std::vector<float>(static_cast<std::size_t>(n), mine[pg.rank()]), rs).wait();
    EXPECT_EQ(buf[4], rs[0]);  // the same order in both collectives (ZeRO == DDP bit for bit)
    results[static_cast<std::size_t>(pg.rank())] = buf[4];
  });
  float want = 1.0f;  // what a left fold in rank order gives
  if (n >= 2) want = 1.0f + 33554432.0f;
  if (n >= 3) want = want - 33554432.0f;
  for (float got : results) EXPECT_EQ(got, want);
  if (n >= 3) {
    EXPECT_EQ(want, 0.0f);  // the test distinguishes orders
  }
}

// Rank 0 runs on the caller's thread, the others on their own: a one-rank run starts no thread,
// so its OpenMP team is the caller's (sim_process_group.cpp says why that matters for speed).
TEST_P(DistSim, RankZeroRunsOnTheCallingThread) {
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::thread::id> ids(static_cast<std::size_t>(GetParam()));
  run_simulated(GetParam(), [&](ProcessGroup& pg) {
    ids[static_cast<std::size_t>(pg.rank())] = std::this_thread::get_id();
    pg.barrier().wait();  // every rank alive at once: no thread reused
  });
  EXPECT_EQ(ids[0], caller);
  for (std::size_t r = 1; r < ids.size(); ++r) {
    EXPECT_NE(ids[r], caller) << "rank " << r;
    for (std::size_t q = 1; q < r; ++q) EXPECT_NE(ids[r], ids[q]) << "ranks " << q << ", " << r;
  }
}

TEST_P(DistSim, SequenceNumbersCountEveryOp) {
  run_simulated(GetParam(), [&](ProcessGroup& pg) {
    EXPECT_EQ(pg.last_seq(), 0u);
    std::vector<float> x(3, 1.0f);
    pg.allreduce(x).wait();
    pg.barrier().wait();
    pg.broadcast(x, 0).wait();
    EXPECT_EQ(pg.last_seq(), 3u);
  });
}

// A rank's tensor bytes (core/tensor.hpp) are what --report-memory's step peak reads. The world's
// sum buffer is nobody's: a real run's sums allocate none, so a simulated rank must not hold it,
// whichever rank arrives last and performs the sum (that rank's report used to grow by it).
TEST_P(DistSim, TheWorldsSumBufferCountsToNoRank) {
  std::vector<std::int64_t> grown(static_cast<std::size_t>(GetParam()), -1);
  run_simulated(GetParam(), [&](ProcessGroup& pg) {
    const std::int64_t n = 1200 * pg.size();
    Tensor mine({n}, Target::Cpu);
    Tensor segment({1200}, Target::Cpu);
    std::vector<std::uint16_t> bits(1200, 0x3f80);  // bf16 1.0: the fp32 accumulation's path
    reset_peak_tensor_bytes(Target::Cpu);
    const std::int64_t live = tensor_bytes(Target::Cpu).live;
    for (int round = 0; round < 3; ++round) {  // each rank arrives last in some round, likely
      pg.allreduce(std::span<float>(mine.data(), static_cast<std::size_t>(n))).wait();
      pg.reduce_scatter(std::span<const float>(mine.data(), static_cast<std::size_t>(n)),
                        std::span<float>(segment.data(), 1200)).wait();
      pg.allreduce(bits).wait();
    }
    grown[static_cast<std::size_t>(pg.rank())] = tensor_bytes(Target::Cpu).peak - live;
  });
  for (std::size_t r = 0; r < grown.size(); ++r) EXPECT_EQ(grown[r], 0) << "rank " << r;
}

TEST_P(DistSim, BarrierWaitsForEveryRank) {
  std::atomic<int> entered{0};
  run_simulated(GetParam(), [&](ProcessGroup& pg) {
    if (pg.rank() == 0) std::this_thread::sleep_for(50ms);  // the straggler
    entered.fetch_add(1);
    pg.barrier().wait();
    EXPECT_EQ(entered.load(), pg.size());
  });
}

TEST_P(DistSim, HostCollectivesKeepTheirType) {
  // A double that travelled as one float would lose the 2^-40 term; an int64 count beyond 2^24
  // would lose its low bits in fp32. The tally counts elements and their bytes.
  run_simulated(GetParam(), [&](ProcessGroup& pg) {
    const double mine = 1.0 + std::ldexp(1.0, -40) * (pg.rank() + 1);
    const double sum = sum_over_ranks(pg, mine);
    const int n = pg.size();
    EXPECT_EQ(sum, n + std::ldexp(1.0, -40) * (n * (n + 1) / 2));
    const std::int64_t count = sum_over_ranks<std::int64_t>(pg, (std::int64_t{1} << 40) + 3);
    EXPECT_EQ(count, n * ((std::int64_t{1} << 40) + 3));
    std::vector<double> all(static_cast<std::size_t>(2 * n));
    const double pair[2] = {mine, -mine};
    all_gather_host(pg, std::span<const double>(pair), all);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(all[2 * static_cast<std::size_t>(r)], 1.0 + std::ldexp(1.0, -40) * (r + 1));
      EXPECT_EQ(all[2 * static_cast<std::size_t>(r) + 1], -all[2 * static_cast<std::size_t>(r)]);
    }
    EXPECT_EQ(pg.tally().elements_of(Collective::AllReduce), 2);
    EXPECT_EQ(pg.tally().bytes_of(Collective::AllReduce), 16);
    EXPECT_EQ(pg.tally().bytes_of(Collective::AllGather), 16);
  });
}

TEST(DistSimErrors, CollectiveOfMixedTypesIsRefused) {
  run_simulated(2, [&](ProcessGroup& pg) {
    std::vector<double> in(4, 1.0);
    std::vector<float> out(2);
    EXPECT_THROW(pg.reduce_scatter(in, out), Error);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, DistSim, ::testing::Values(1, 2, 3, 4));

TEST(DistSimErrors, PreconditionsNameTheOp) {
  run_simulated(2, [](ProcessGroup& pg) {
    std::vector<float> in(5), out(3);
    EXPECT_THROW(pg.reduce_scatter(in, out), Error);
    EXPECT_THROW(pg.all_gather(out, in), Error);
    EXPECT_THROW(pg.broadcast(out, 2), Error);
    std::vector<float> flat(8);
    // Overlap that is not this rank's segment.
    EXPECT_THROW(pg.all_gather(std::span<const float>(flat.data() + 1, 4), flat), Error);
    if (pg.rank() == 1) {
      EXPECT_THROW(pg.reduce_scatter(flat, std::span<float>(flat.data(), 4)), Error);
    }
    EXPECT_THROW(pg.reduce_scatter(flat, std::span<float>(flat.data() + 2, 4)), Error);
    EXPECT_EQ(pg.last_seq(), 0u);  // refused ops take no sequence number
  });
  EXPECT_THROW(run_simulated(0, [](ProcessGroup&) {}), InputError);
}

TEST(DistSimErrors, ThrowingRankMakesPeersFailFast) {
  const auto start = std::chrono::steady_clock::now();
  std::atomic<int> peers_failed{0};
  try {
    run_simulated(
        3,
        [&](ProcessGroup& pg) {
          std::vector<float> x(4, 1.0f);
          pg.allreduce(x).wait();
          if (pg.rank() == 1) throw std::runtime_error("boom on rank 1");
          try {
            pg.allreduce(x).wait();  // rank 1 never arrives
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("rank 1 failed: boom on rank 1"),
                      std::string::npos)
                << e.what();
            EXPECT_NE(std::string(e.what()).find("allreduce #2"), std::string::npos) << e.what();
            peers_failed.fetch_add(1);
            throw;
          }
        },
        ProcessGroupOptions{60s});
    FAIL() << "run_simulated returned normally";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom on rank 1");  // the root cause, not a peer's error
  }
  EXPECT_EQ(peers_failed.load(), 2);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);  // not the 60 s timeout
}

TEST(DistSimErrors, MismatchedCollectivesFailWithBothNamed) {
  try {
    run_simulated(
        2,
        [](ProcessGroup& pg) {
          std::vector<float> x(pg.rank() == 0 ? 4 : 5, 1.0f);
          pg.allreduce(x).wait();
        },
        ProcessGroupOptions{60s});
    FAIL() << "mismatch not detected";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("collective mismatch at #1"), std::string::npos) << what;
    EXPECT_NE(what.find("allreduce of 4 elements"), std::string::npos) << what;
    EXPECT_NE(what.find("allreduce of 5 elements"), std::string::npos) << what;
  }
}

TEST(DistSimErrors, UnwaitedWorkCompletesInDestructor) {
  run_simulated(3, [](ProcessGroup& pg) {
    std::vector<float> x(10, 1.0f);
    { Work dropped = pg.allreduce(x); }
    EXPECT_EQ(x[9], 3.0f);
  });
}

}  // namespace
}  // namespace noeira::dist
