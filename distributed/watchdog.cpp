#include "distributed/watchdog.hpp"

#include <cstdio>
#include <exception>
#include <iomanip>
#include <sstream>

namespace noeira::dist {

namespace {
using Clock = std::chrono::steady_clock;

Clock::time_point deadline_of(const CollectiveRecord& r) {
  // Saturate: a "never" timeout (Milliseconds::max()) must not overflow the time point.
  const auto room = std::chrono::duration_cast<Milliseconds>(Clock::time_point::max() - r.start);
  return r.timeout >= room ? Clock::time_point::max() : r.start + r.timeout;
}
}  // namespace

Watchdog::Watchdog(Handler on_timeout) : on_timeout_(std::move(on_timeout)) {
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::uint64_t Watchdog::track(const CollectiveRecord& record) {
  std::uint64_t token = 0;
  bool earlier = false;
  {
    std::lock_guard lk(mu_);
    token = next_token_++;
    entries_.emplace(token, record);
    earlier = deadline_of(record) < wake_at_;
  }
  // Only a deadline before the thread's next look needs it awake: waking it for every op costs a
  // context switch per collective, which small collectives on busy cores feel.
  if (earlier) cv_.notify_all();
  return token;
}

void Watchdog::done(std::uint64_t token) {
  std::lock_guard lk(mu_);
  entries_.erase(token);
}

std::size_t Watchdog::in_flight() const {
  std::lock_guard lk(mu_);
  return entries_.size();
}

void Watchdog::loop() {
  std::unique_lock lk(mu_);
  while (!stop_) {
    if (entries_.empty()) {
      wake_at_ = Clock::time_point::max();
      cv_.wait(lk);
      continue;
    }
    auto earliest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (deadline_of(it->second) < deadline_of(earliest->second)) earliest = it;
    }
    const Clock::time_point deadline = deadline_of(earliest->second);
    if (Clock::now() < deadline) {
      wake_at_ = deadline;
      cv_.wait_until(lk, deadline);
      continue;
    }
    const CollectiveRecord record = earliest->second;
    entries_.erase(earliest);
    // The handler may take a while (a side-channel query) and may call back into done().
    lk.unlock();
    try {
      on_timeout_(record);
    } catch (const std::exception& e) {
      // A throwing handler must not take the process down through std::terminate.
      std::fprintf(stderr, "noeira: error: watchdog handler failed: %s\n", e.what());
    }
    lk.lock();
  }
}

namespace {
void write_ranks(std::ostream& os, std::span<const int> ranks) {
  for (std::size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
}

std::string message_with(const CollectiveRecord& record, std::span<const int> missing,
                         std::string_view none) {
  std::ostringstream os;
  os << "watchdog: " << to_string(record.kind) << " #" << record.seq << " timed out after "
     << std::fixed << std::setprecision(1) << std::chrono::duration<double>(record.timeout).count()
     << " s; ranks not arrived: ";
  if (missing.empty()) {
    os << none;
  } else {
    write_ranks(os, missing);
  }
  return os.str();
}
}  // namespace

std::string timeout_message(const CollectiveRecord& record, std::span<const int> missing) {
  return message_with(record, missing, "unknown");
}

std::string timeout_message(const CollectiveRecord& record, const PeerStates& peers) {
  std::ostringstream os;
  os << message_with(record, peers.not_arrived, peers.not_answered.empty() ? "none" : "unknown");
  if (!peers.heartbeat_stopped.empty()) {
    os << "; heartbeat stopped: ";
    write_ranks(os, peers.heartbeat_stopped);
  }
  if (!peers.not_answered.empty()) {
    os << "; side channel not answered: ";
    write_ranks(os, peers.not_answered);
  }
  return os.str();
}

}  // namespace noeira::dist
