#include "distributed/mpi_side_channel.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distributed/mpi_check.hpp"
#include "distributed/mpi_process_group.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

namespace {
// What a rank publishes about the collective it entered last: {seq, kind, count}.
constexpr int kEntryWords = 3;
using Entry = std::array<std::int64_t, kEntryWords>;
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
}

void MpiSideChannel::publish(const CollectiveCall& call) {
  NOEIRA_MPI_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank_, 0, win_));
  entry_[0] = static_cast<std::int64_t>(call.seq);
  entry_[1] = static_cast<std::int64_t>(call.kind);
  entry_[2] = call.count;
  NOEIRA_MPI_CHECK(MPI_Win_unlock(rank_, win_));
}

void MpiSideChannel::close() noexcept {
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
      std::vector<Entry> all(static_cast<std::size_t>(size));
      for (int r = 0; r < size; ++r) {
        if (r == rank) continue;
        NOEIRA_MPI_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, r, 0, win));
        NOEIRA_MPI_CHECK(MPI_Get(all[static_cast<std::size_t>(r)].data(), kEntryWords, MPI_INT64_T,
                                 r, 0, kEntryWords, MPI_INT64_T, win));
        NOEIRA_MPI_CHECK(MPI_Win_unlock(r, win));
      }
      std::vector<int> missing;
      std::string mismatched;
      for (int r = 0; r < size; ++r) {
        if (r == rank) continue;
        const Entry& e = all[static_cast<std::size_t>(r)];
        if (e[0] < static_cast<std::int64_t>(record.seq)) {
          missing.push_back(r);
        } else if (e[0] == static_cast<std::int64_t>(record.seq) &&
                   (e[1] != static_cast<std::int64_t>(record.kind) || e[2] != record.count)) {
          mismatched +=
              detail::concat("; rank ", r, " entered ", to_string(static_cast<Collective>(e[1])),
                             " #", e[0], " of ", e[2], " elements");
        }
      }
      query->set_value(timeout_message(record, missing) + mismatched);
    } catch (...) {
      query->set_exception(std::current_exception());
    }
  }).detach();
  std::string message;
  const auto budget = std::min(record.timeout, Milliseconds(10000));
  if (answer.wait_for(budget) == std::future_status::ready) {
    try {
      message = answer.get();
    } catch (const std::exception& e) {
      message = timeout_message(record, {}) + " (side channel failed: " + e.what() + ")";
    }
  } else {
    message = timeout_message(record, {}) + " (side channel did not answer)";
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
