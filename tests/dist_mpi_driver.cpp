// The multi-rank driver run under mpiexec by tests/dist.cmake (not part of the gtest binary: it
// owns MPI initialization). nccl-tests style: the exit code is pass/fail, and the number of wrong
// elements is summed over ranks so every rank reports the same verdict.
//
//   dist_mpi_driver collectives          every collective, exact results, sizes not dividing evenly
//   dist_mpi_driver rank_order           sums bit for bit equal to the left fold in rank order
//   dist_mpi_driver watchdog <ms> <rank> rank <rank> skips allreduce #2: the job must abort
//                                        (watchdog_shared: the buffer in shared memory)
//   dist_mpi_driver stopped <ms> <rank>  rank <rank> enters allreduce #2 and stops (SIGSTOP):
//                                        the job must abort naming its stopped heartbeat
//   dist_mpi_driver policies             every policy vs one rank with the whole batch, replicas
//                                        identical, memory within 5% of the formula
//   dist_mpi_driver shared_mismatch      one rank's allreduce buffer in shared memory, the
//                                        others' not: every rank refuses the op, naming a rank
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "dist_checks.hpp"
#include "dist_training.hpp"
#include "distributed/mpi_process_group.hpp"
#include "distributed/mpi_shared_sums.hpp"
#include "kernels/error.hpp"

namespace {

using namespace noeira::dist;

int run_collectives() {
  std::int64_t wrong = 0;
  int rank = 0, size = 0;
  {
    auto pg = make_mpi_process_group(ProcessGroupOptions{std::chrono::seconds(60)});
    rank = pg->rank();
    size = pg->size();
    if (pg->backend() != "mpi") ++wrong;
    wrong += checks::check_all(*pg);
    // More shared memory than the windows' tmpfs has room for: ordinary memory on every rank
    // instead (nullptr), not a process killed at the first touch of a page.
    if (pg->shared_memory(std::size_t{1} << 50) != nullptr) ++wrong;
    if (pg->shared_memory(4096) == nullptr) ++wrong;  // on one node, room for a small one
    // Buffers in the group's shared memory: on one node the ops work on them in place.
    wrong += checks::check_all(*pg, checks::Memory::Shared);
    // All-gathers large enough to stream past the cache, segments of no whole number of cache
    // lines (each destination's head and tail go through memcpy).
    const auto peers = static_cast<std::size_t>(std::max(1, size - 1));
    const auto streamed =
        static_cast<std::int64_t>(kStreamedAllGatherBytes / sizeof(float) / peers) + 5;
    wrong += checks::check_all_gather<float>(*pg, streamed, false, checks::Memory::Shared);
    wrong += checks::check_all_gather<float>(*pg, streamed, true, checks::Memory::Shared);
    // Non-integer data against the raw library: equal up to rounding (MPI's blocking and
    // non-blocking allreduce may add in different orders at 3 ranks, so bits can differ).
    std::vector<float> ours(4099), raw(4099);
    for (std::size_t i = 0; i < ours.size(); ++i) {
      ours[i] = raw[i] = 0.1f * static_cast<float>(rank + 1) * static_cast<float>(i % 13);
    }
    pg->allreduce(ours).wait();
    MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(raw.size()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    for (std::size_t i = 0; i < ours.size(); ++i) {
      if (std::fabs(ours[i] - raw[i]) > 1e-6f * std::fabs(raw[i])) ++wrong;
    }
    // A second group is independent: its sequence numbers start at 1 again.
    auto other = make_mpi_process_group();
    other->barrier().wait();
    if (other->last_seq() != 1) ++wrong;
  }
  long long total = 0, mine = static_cast<long long>(wrong);
  MPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  std::printf("rank %d of %d: %lld wrong here, %lld wrong in total\n", rank, size, mine, total);
  return total == 0 ? 0 : 1;
}

// With NOEIRA_RANKS_PER_NODE=M (nodes of M consecutive ranks pretended), the order of such nodes.
int run_rank_order() {
  std::int64_t wrong = 0;
  int rank = 0, size = 0;
  const char* per_node = std::getenv("NOEIRA_RANKS_PER_NODE");
  const int m = per_node != nullptr ? std::atoi(per_node) : 0;
  {
    auto pg = make_mpi_process_group(ProcessGroupOptions{std::chrono::seconds(60)});
    rank = pg->rank();
    size = pg->size();
    wrong += checks::check_rank_order_all(*pg, checks::Memory::Private, m);
    wrong += checks::check_rank_order_all(*pg, checks::Memory::Shared, m);
  }
  long long total = 0, mine = static_cast<long long>(wrong);
  MPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  std::printf("rank %d of %d: %lld sums off the rank-order fold (nodes of %d ranks) here, %lld in "
              "total\n", rank, size, mine, m > 0 ? m : size, total);
  return total == 0 ? 0 : 1;
}

// shared: the allreduces' buffer in the group's shared memory (1 MiB: in place, whose ranks
// also wait for each other's release at the end).
int run_watchdog(int timeout_ms, int skipper, bool shared) {
  auto pg = make_mpi_process_group(ProcessGroupOptions{std::chrono::milliseconds(timeout_ms)});
  std::vector<float> own(1000, 1.0f);
  std::shared_ptr<void> memory = shared ? pg->shared_memory(std::size_t{1} << 20) : nullptr;
  if (shared && memory == nullptr) {
    std::fprintf(stderr, "rank %d: no shared memory in this group\n", pg->rank());
    return 1;
  }
  const std::span<float> x = shared ? std::span<float>(static_cast<float*>(memory.get()), 1 << 18)
                                    : std::span<float>(own);
  pg->allreduce(x).wait();  // #1: everybody
  if (pg->rank() == skipper) {
    // Skips #2 and stays busy outside MPI far longer than the timeout: the peers' watchdogs must
    // end the job; reaching the end is a failure.
    std::this_thread::sleep_for(std::chrono::seconds(60));
    std::fprintf(stderr, "rank %d: the job was not aborted\n", pg->rank());
    return 0;
  }
  pg->allreduce(x).wait();  // #2: never completes
  std::fprintf(stderr, "rank %d: allreduce #2 completed without rank %d\n", pg->rank(), skipper);
  return 0;
}

int run_stopped(int timeout_ms, int stopper) {
  auto pg = make_mpi_process_group(ProcessGroupOptions{std::chrono::milliseconds(timeout_ms)});
  // Large enough for the two-phase allreduce (mpi_ordered_sum.hpp): the stopped rank must post
  // its second phase for the op to finish anywhere. A small allreduce is one all-gather, whose
  // few bytes leave every rank eagerly as it posts, so the others could finish it without the
  // stopped rank: nothing would hang, and there would be nothing to catch.
  std::vector<float> x(1 << 18, 1.0f);
  pg->allreduce(x).wait();  // #1: everybody
  Work second = pg->allreduce(x);  // #2: entered (published) by every rank
  if (pg->rank() == stopper) {
    // The whole process stops inside the op, as `kill -STOP` does it: its sequence number says
    // it arrived, only its heartbeat can tell that it makes no progress. Open MPI's abort
    // continues it (SIGCONT) just before it terminates it: wait for that.
    std::raise(SIGSTOP);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    std::fprintf(stderr, "rank %d: the job was not aborted\n", stopper);
    return 0;
  }
  second.wait();  // never completes
  std::fprintf(stderr, "rank %d: allreduce #2 completed without rank %d\n", pg->rank(), stopper);
  return 0;
}

// Rank 0 passes an allreduce a buffer in the group's shared memory, the others a private copy:
// every rank must fail that op with a message naming a rank whose buffer differs, not read a
// wrong place or hang. Prints each rank's message; the test matches them.
int run_shared_mismatch() {
  auto pg = make_mpi_process_group(ProcessGroupOptions{std::chrono::seconds(20)});
  std::shared_ptr<void> shared = pg->shared_memory(4096 * sizeof(float));
  if (shared == nullptr) {
    std::printf("rank %d: no shared memory in this group\n", pg->rank());
    return 1;
  }
  std::vector<float> copy(4096, 1.0f);
  std::span<float> buf = pg->rank() == 0 ? std::span<float>(static_cast<float*>(shared.get()), 4096)
                                         : std::span<float>(copy);
  try {
    pg->allreduce(buf).wait();
  } catch (const noeira::Error& e) {
    std::printf("rank %d refused: %s\n", pg->rank(), e.what());
    std::fflush(stdout);
    // The failed op stays queued: the group cannot end collectively any more.
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  std::printf("rank %d: the allreduce completed\n", pg->rank());
  return 0;
}

// Element-wise min and max over ranks: equal everywhere iff every rank holds the same bits.
bool identical_across_ranks(const std::vector<float>& v) {
  std::vector<float> lo(v), hi(v);
  MPI_Allreduce(MPI_IN_PLACE, lo.data(), static_cast<int>(lo.size()), MPI_FLOAT, MPI_MIN,
                MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, hi.data(), static_cast<int>(hi.size()), MPI_FLOAT, MPI_MAX,
                MPI_COMM_WORLD);
  return lo == hi;
}

int run_policies() {
  using namespace harness;
  std::vector<double> ref_losses;
  const std::vector<float> ref = train_single(&ref_losses);  // every rank computes it alone
  const double tol = 1e-4 * max_abs(ref) + 1e-6;
  int failures = 0;
  int rank = 0, size = 1;
  auto pg = make_mpi_process_group(ProcessGroupOptions{std::chrono::seconds(60)});
  rank = pg->rank();
  size = pg->size();
  std::vector<float> ddp_params;
  for (Policy p : {Policy::Ddp, Policy::Zero1, Policy::Zero2, Policy::Zero3}) {
    RunOptions o;
    o.policy = p;
    o.ranks = size;
    o.rank_seeds = true;  // replicas start different: the broadcast must make them equal
    const RankResult run = train_rank(*pg, o);
    double worst = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(run.params[i] - ref[i])));
    }
    const bool matches = worst <= tol;
    const bool decreasing = run.losses.back() < run.losses.front();
    const bool replicas = identical_across_ranks(run.params);
    const bool started_apart = !identical_across_ranks(run.before_broadcast);
    const MemoryReport m = memory_after_one_step(*pg, p);
    const bool memory_ok =
        within_five_percent(static_cast<double>(m.total_bytes()), m.formula_total_bytes());
    bool same_as_ddp = true;
    if (p == Policy::Ddp) {
      ddp_params = run.params;
    } else {
      same_as_ddp = ddp_params == run.params;  // not required under MPI: reported, not failed
    }
    const bool ok = matches && decreasing && replicas && started_apart && memory_ok;
    if (!memory_ok) std::printf("rank %d: memory off the formula by more than 5%%\n", rank);
    failures += ok ? 0 : 1;
    std::printf(
        "rank %d/%d %s: max |p - p_1rank| %.3g (tol %.3g) %s, loss %.4f -> %.4f, replicas %s, "
        "%s DDP; %s\n",
        rank, size, std::string(to_string(p)).c_str(), worst, tol, matches ? "ok" : "FAIL",
        run.losses.front(), run.losses.back(), replicas ? "identical" : "DIFFER",
        same_as_ddp ? "bit-identical to" : "rounding-close to", m.to_string().c_str());
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return total == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    MpiRuntime mpi(&argc, &argv);
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "collectives") return run_collectives();
    if (mode == "policies") return run_policies();
    if (mode == "rank_order") return run_rank_order();
    if (mode == "shared_mismatch") return run_shared_mismatch();
    if ((mode == "watchdog" || mode == "watchdog_shared") && argc == 4)
      return run_watchdog(std::atoi(argv[2]), std::atoi(argv[3]), mode == "watchdog_shared");
    if (mode == "stopped" && argc == 4) return run_stopped(std::atoi(argv[2]), std::atoi(argv[3]));
    std::fprintf(stderr,
                 "usage: %s collectives | rank_order | policies | shared_mismatch | "
                 "watchdog[_shared] <timeout-ms> <skipping-rank> | "
                 "stopped <timeout-ms> <stopping-rank>\n",
                 argv[0]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "noeira: error: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
