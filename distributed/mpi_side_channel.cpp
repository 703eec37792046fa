#include "distributed/mpi_side_channel.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "distributed/mpi_check.hpp"
#include "distributed/mpi_process_group.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

namespace {
// What a rank publishes: the collective it entered last {seq, kind, count}, and its heartbeat.
constexpr int kEntryWords = 4;
constexpr int kHeartbeatWord = 3;
using Entry = std::array<std::int64_t, kEntryWords>;
using Clock = std::chrono::steady_clock;

// How long one read of the peers' entries may take before a peer counts as not answering: reads
// of a live peer's window take microseconds.
constexpr std::chrono::milliseconds kAnswerTime{2000};

// Every peer's entry, read with request-based gets inside an epoch the caller opened with
// MPI_Win_lock_all; nullopt for a peer whose read did not complete by `deadline`. Such a read
// stays posted, so the buffers must outlive it: `buffers` is the caller's, kept for ever then.
std::vector<std::optional<Entry>> read_entries(MPI_Win win, int rank, int size,
                                               std::vector<Entry>& buffers,
                                               Clock::time_point deadline, bool& pending) {
  std::vector<MPI_Request> requests(static_cast<std::size_t>(size), MPI_REQUEST_NULL);
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    NOEIRA_MPI_CHECK(MPI_Rget(buffers[static_cast<std::size_t>(r)].data(), kEntryWords,
                              MPI_INT64_T, r, 0, kEntryWords, MPI_INT64_T, win,
                              &requests[static_cast<std::size_t>(r)]));
  }
  std::vector<std::optional<Entry>> out(static_cast<std::size_t>(size));
  int left = size - 1;
  while (left > 0 && Clock::now() < deadline) {
    for (int r = 0; r < size; ++r) {
      MPI_Request& req = requests[static_cast<std::size_t>(r)];
      if (req == MPI_REQUEST_NULL) continue;
      int done = 0;
      NOEIRA_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
      if (done) {
        out[static_cast<std::size_t>(r)] = buffers[static_cast<std::size_t>(r)];
        --left;
      }
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  pending = pending || left > 0;
  return out;
}

// Reads every peer twice, kHeartbeatWatch apart, and sorts them by what the reads say.
PeerStates query_peers(MPI_Win win, int rank, int size, const CollectiveRecord& record,
                       std::string& mismatched) {
  // Kept for ever if a read stays posted (see read_entries): the process aborts soon anyway.
  auto buffers = std::make_unique<std::vector<Entry>>(static_cast<std::size_t>(size));
  bool pending = false;
  NOEIRA_MPI_CHECK(MPI_Win_lock_all(0, win));
  const auto first = read_entries(win, rank, size, *buffers, Clock::now() + kAnswerTime, pending);
  std::this_thread::sleep_for(kHeartbeatWatch);
  const auto second = read_entries(win, rank, size, *buffers, Clock::now() + kAnswerTime, pending);
  if (pending) {
    (void)buffers.release();
  } else {
    NOEIRA_MPI_CHECK(MPI_Win_unlock_all(win));
  }
  PeerStates peers;
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    const auto& a = first[static_cast<std::size_t>(r)];
    const auto& b = second[static_cast<std::size_t>(r)];
    if (!a || !b) {
      peers.not_answered.push_back(r);
      if (!a) continue;
    }
    const Entry& e = *a;
    if (e[0] < static_cast<std::int64_t>(record.seq)) {
      peers.not_arrived.push_back(r);
    } else if (e[0] == static_cast<std::int64_t>(record.seq) &&
               (e[1] != static_cast<std::int64_t>(record.kind) || e[2] != record.count)) {
      mismatched +=
          detail::concat("; rank ", r, " entered ", to_string(static_cast<Collective>(e[1])), " #",
                         e[0], " of ", e[2], " elements");
    }
    if (b && (*b)[kHeartbeatWord] == e[kHeartbeatWord]) peers.heartbeat_stopped.push_back(r);
  }
  return peers;
}
}  // namespace

MpiSideChannel::MpiSideChannel(MPI_Comm parent) {
  // Our own communicator: our collectives never match a caller's, and errors return to us.
  NOEIRA_MPI_CHECK(MPI_Comm_dup(parent, &comm_));
  NOEIRA_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  NOEIRA_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  NOEIRA_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  NOEIRA_MPI_CHECK(MPI_Win_allocate(kEntryWords * sizeof(std::int64_t), sizeof(std::int64_t),
                                    MPI_INFO_NULL, comm_, &entry_, &win_));
  NOEIRA_MPI_CHECK(MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN));
  for (int i = 0; i < kEntryWords; ++i) entry_[i] = 0;
  // Every rank's entry is initialized before any peer may read it.
  NOEIRA_MPI_CHECK(MPI_Barrier(comm_));
  // A plain atomic store into our own window memory, not an MPI call (publish() writes the same
  // way): Open MPI's windows are MPI_WIN_UNIFIED, so a local store is what a peer's get reads.
  heartbeat_ = std::thread([this] {
    std::atomic_ref<std::int64_t> beat(entry_[kHeartbeatWord]);
    std::unique_lock lk(heartbeat_mu_);
    while (!heartbeat_cv_.wait_for(lk, kHeartbeatPeriod, [this] { return stop_; })) {
      beat.fetch_add(1, std::memory_order_relaxed);
    }
  });
}

MpiSideChannel::~MpiSideChannel() { stop_heartbeat(); }

void MpiSideChannel::stop_heartbeat() noexcept {
  {
    std::lock_guard lk(heartbeat_mu_);
    stop_ = true;
  }
  heartbeat_cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

void MpiSideChannel::publish(const CollectiveCall& call) {
  // Plain atomic stores, as the heartbeat's, not an exclusive MPI lock on our own window: a rank
  // stopped (SIGSTOP) while holding that lock kept every peer's MPI_Win_lock_all waiting, and the
  // watchdog could name no one. The sequence number goes last, with release: a peer that reads
  // the new number (word 0, read first) reads the kind and count stored before it.
  std::atomic_ref<std::int64_t>(entry_[1]).store(static_cast<std::int64_t>(call.kind),
                                                 std::memory_order_relaxed);
  std::atomic_ref<std::int64_t>(entry_[2]).store(call.count, std::memory_order_relaxed);
  std::atomic_ref<std::int64_t>(entry_[0]).store(static_cast<std::int64_t>(call.seq),
                                                 std::memory_order_release);
}

void MpiSideChannel::close() noexcept {
  // Before the window goes: the heartbeat writes into it.
  stop_heartbeat();
  if (std::uncaught_exceptions() > 0) return;
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiSideChannel::fail_job(const CollectiveRecord& record,
                              const std::function<void()>& before_abort) {
  // The query runs on its own thread with a bounded wait, so that a side channel which itself
  // hangs (a peer whose MPI library is wedged) cannot keep the job alive. It copies what it needs:
  // it may outlive this call.
  auto query = std::make_shared<std::promise<std::string>>();
  std::future<std::string> answer = query->get_future();
  std::thread([win = win_, rank = rank_, size = size_, record, query] {
    try {
      std::string mismatched;
      const PeerStates peers = query_peers(win, rank, size, record, mismatched);
      query->set_value(timeout_message(record, peers) + mismatched);
    } catch (...) {
      query->set_exception(std::current_exception());
    }
  }).detach();
  std::string message;
  const std::string unknown = timeout_message(record, std::span<const int>{});
  // The query's own waits are bounded (two reads and the watch between them); this one catches a
  // side channel that blocks outside them.
  const auto budget = 2 * kAnswerTime + kHeartbeatWatch + Milliseconds(2000);
  if (answer.wait_for(budget) == std::future_status::ready) {
    try {
      message = answer.get();
    } catch (const std::exception& e) {
      message = unknown + " (side channel failed: " + e.what() + ")";
    }
  } else {
    message = unknown + " (side channel did not answer)";
  }
  std::fprintf(stderr, "noeira: error: %s (seen by rank %d of %d)\n", message.c_str(), rank_,
               size_);
  std::fflush(stderr);
  if (before_abort) {
    try {
      before_abort();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "noeira: error: watchdog: before abort: %s\n", e.what());
    }
  }
  MPI_Abort(comm_, kWatchdogExitCode);
  std::_Exit(kWatchdogExitCode);  // MPI_Abort should not return; make sure
}

}  // namespace noeira::dist
