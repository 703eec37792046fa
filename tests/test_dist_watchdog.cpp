// The collective watchdog: on its own, and through the simulated backend, where a rank that skips
// a collective must make the run fail within the timeout with a message naming that rank.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "distributed/sim_process_group.hpp"
#include "distributed/watchdog.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

CollectiveRecord record(std::uint64_t seq, Milliseconds timeout) {
  return {Collective::AllReduce, seq, 0, 10, Clock::now(), timeout};
}

TEST(DistWatchdog, MessageFormat) {
  const std::vector<int> missing = {1, 3};
  EXPECT_EQ(timeout_message(record(17, 2000ms), std::vector<int>{1}),
            "watchdog: allreduce #17 timed out after 2.0 s; ranks not arrived: 1");
  EXPECT_EQ(timeout_message({Collective::ReduceScatter, 4, 0, 1, Clock::now(), 250ms}, missing),
            "watchdog: reduce_scatter #4 timed out after 0.2 s; ranks not arrived: 1, 3");
  EXPECT_EQ(timeout_message(record(1, 1000ms), std::span<const int>{}),
            "watchdog: allreduce #1 timed out after 1.0 s; ranks not arrived: unknown");
}

TEST(DistWatchdog, MessageNamesStoppedAndSilentPeers) {
  // Every peer answered and entered the op, one of them makes no progress: named, not "unknown".
  EXPECT_EQ(timeout_message(record(5, 1000ms), PeerStates{{}, {1}, {}}),
            "watchdog: allreduce #5 timed out after 1.0 s; ranks not arrived: none; heartbeat "
            "stopped: 1");
  EXPECT_EQ(timeout_message(record(5, 1000ms), PeerStates{{2}, {2}, {}}),
            "watchdog: allreduce #5 timed out after 1.0 s; ranks not arrived: 2; heartbeat "
            "stopped: 2");
  // A peer that did not answer may not have arrived either: unknown, and named as silent.
  EXPECT_EQ(timeout_message(record(5, 1000ms), PeerStates{{}, {}, {3}}),
            "watchdog: allreduce #5 timed out after 1.0 s; ranks not arrived: unknown; side "
            "channel not answered: 3");
}

TEST(DistWatchdog, FiresOnlyForOpsNotDoneInTime) {
  std::atomic<int> fired{0};
  std::atomic<std::uint64_t> fired_seq{0};
  Watchdog wd([&](const CollectiveRecord& r) {
    fired_seq = r.seq;
    fired.fetch_add(1);
  });
  const std::uint64_t quick = wd.track(record(1, 100ms));
  wd.track(record(2, 100ms));
  wd.track(record(3, Milliseconds::max()));  // "never" must not overflow into "now"
  wd.done(quick);
  const auto start = Clock::now();
  while (fired.load() == 0 && Clock::now() - start < 5s) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(200ms);  // room for a wrong second firing
  EXPECT_EQ(fired.load(), 1);
  EXPECT_EQ(fired_seq.load(), 2u);
  EXPECT_GE(Clock::now() - start, 100ms);
  EXPECT_EQ(wd.in_flight(), 1u);  // the "never" op
}

// The thread sleeps until the earliest deadline it knows and is woken only for an earlier one:
// a short op started while a long one is in flight must still fire on time.
TEST(DistWatchdog, EarlierDeadlineWakesTheSleepingThread) {
  std::atomic<std::uint64_t> fired_seq{0};
  Watchdog wd([&](const CollectiveRecord& r) { fired_seq = r.seq; });
  wd.track(record(1, 60000ms));
  std::this_thread::sleep_for(50ms);  // the thread is now asleep until op #1's deadline
  const auto start = Clock::now();
  wd.track(record(2, 100ms));
  while (fired_seq.load() == 0 && Clock::now() - start < 5s) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(fired_seq.load(), 2u);
  EXPECT_LT(Clock::now() - start, 2s);
}

std::string run_expecting_failure(int ranks, const std::function<void(ProcessGroup&)>& body,
                                  Milliseconds timeout, Clock::duration* elapsed) {
  const auto start = Clock::now();
  try {
    run_simulated(ranks, body, ProcessGroupOptions{timeout});
  } catch (const Error& e) {
    *elapsed = Clock::now() - start;
    return e.what();
  }
  *elapsed = Clock::now() - start;
  return "no error";
}

TEST(DistWatchdog, SimulatedRankSkippingACollectiveIsNamed) {
  Clock::duration elapsed{};
  const std::string what = run_expecting_failure(
      3,
      [](ProcessGroup& pg) {
        std::vector<float> x(8, 1.0f);
        pg.allreduce(x).wait();      // #1: everybody
        if (pg.rank() == 1) return;  // rank 1 skips #2
        pg.allreduce(x).wait();
      },
      300ms, &elapsed);
  EXPECT_NE(what.find("watchdog: allreduce #2 timed out after 0.3 s; ranks not arrived: 1"),
            std::string::npos)
      << what;
  EXPECT_GE(elapsed, 300ms);
  EXPECT_LT(elapsed, 5s);
}

TEST(DistWatchdog, SimulatedNamesEveryMissingRank) {
  Clock::duration elapsed{};
  const std::string what = run_expecting_failure(
      4,
      [](ProcessGroup& pg) {
        std::vector<float> in(8, 1.0f), out(2);
        if (pg.rank() >= 2) return;
        pg.reduce_scatter(in, out).wait();
      },
      200ms, &elapsed);
  EXPECT_NE(what.find("reduce_scatter #1 timed out after 0.2 s; ranks not arrived: 2, 3"),
            std::string::npos)
      << what;
  EXPECT_LT(elapsed, 5s);
}

TEST(DistWatchdog, PerOpTimeoutOverridesTheGroups) {
  Clock::duration elapsed{};
  const std::string what = run_expecting_failure(
      2,
      [](ProcessGroup& pg) {
        if (pg.rank() == 1) return;
        pg.barrier(CollectiveOptions{150ms}).wait();
      },
      60s, &elapsed);
  EXPECT_NE(what.find("barrier #1 timed out after 0.1 s; ranks not arrived: 1"), std::string::npos)
      << what;
  EXPECT_LT(elapsed, 5s);
}

TEST(DistWatchdog, SlowButCompleteOpsDoNotFire) {
  // Every op completes, some after most of the timeout: no false alarm.
  run_simulated(
      3,
      [](ProcessGroup& pg) {
        std::vector<float> x(4, 1.0f);
        for (int i = 0; i < 3; ++i) {
          if (pg.rank() == i) std::this_thread::sleep_for(100ms);
          pg.allreduce(x).wait();
        }
      },
      ProcessGroupOptions{1000ms});
}

}  // namespace
}  // namespace noeira::dist
