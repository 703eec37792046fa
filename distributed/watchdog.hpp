#pragma once
// The collective watchdog: one thread that holds every op in flight with its deadline and calls a
// backend-supplied handler for an op that has not completed in time. The handler knows how to
// name the ranks that did not arrive (the simulated world knows; under MPI each rank publishes its
// last entered sequence number through a one-sided window) and how to fail the job.
//
// The clock of an op starts when it is started, so a Work held unwaited longer than the timeout
// reads as a hang; policies wait for their ops within the same step.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "distributed/process_group.hpp"

namespace noeira::dist {

struct CollectiveRecord {
  Collective kind = Collective::Barrier;
  std::uint64_t seq = 0;
  int rank = 0;
  std::int64_t count = 0;
  std::chrono::steady_clock::time_point start;
  Milliseconds timeout{0};
};

class Watchdog {
 public:
  // Called on the watchdog thread, once per op that timed out, without the watchdog's lock.
  using Handler = std::function<void(const CollectiveRecord&)>;

  explicit Watchdog(Handler on_timeout);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts watching an op; returns the token that done() takes.
  std::uint64_t track(const CollectiveRecord& record);
  // The op completed (or failed and was reported): stop watching it. Unknown tokens are ignored.
  void done(std::uint64_t token);
  // Ops being watched now.
  std::size_t in_flight() const;

 private:
  void loop();

  Handler on_timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint64_t, CollectiveRecord> entries_;
  std::uint64_t next_token_ = 1;
  // When the thread will look again on its own (max: only when notified). track() notifies only
  // for an earlier deadline, so a steady stream of ops does not wake the thread once per op.
  std::chrono::steady_clock::time_point wake_at_ = std::chrono::steady_clock::time_point::max();
  bool stop_ = false;
  std::thread thread_;
};

// "watchdog: allreduce #17 timed out after 2.0 s; ranks not arrived: 1, 3". An empty `missing`
// reads "ranks not arrived: unknown" (the side channel could not tell).
std::string timeout_message(const CollectiveRecord& record, std::span<const int> missing);

// What a side channel found out about the peers of an op that timed out.
struct PeerStates {
  std::vector<int> not_arrived;        // last entered an earlier op
  std::vector<int> heartbeat_stopped;  // the whole process made no progress (stopped, wedged)
  std::vector<int> not_answered;       // their side channel did not answer in time
};

// The message with what the peers' states tell:
//   "...; ranks not arrived: none; heartbeat stopped: 1"
//   "...; ranks not arrived: 2; side channel not answered: 3"
// "none" when every peer answered and none is behind, "unknown" when some did not answer.
std::string timeout_message(const CollectiveRecord& record, const PeerStates& peers);

}  // namespace noeira::dist
