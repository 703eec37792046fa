#include "distributed/process_group.hpp"

#include <exception>

#include "distributed/watchdog.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return "allreduce";
    case Collective::ReduceScatter:
      return "reduce_scatter";
    case Collective::AllGather:
      return "all_gather";
    case Collective::Broadcast:
      return "broadcast";
    case Collective::Barrier:
      return "barrier";
  }
  return "?";
}

std::string describe(Collective kind, std::uint64_t seq, int rank, int size) {
  return detail::concat(to_string(kind), " #", seq, " (rank ", rank, " of ", size, ")");
}

namespace {
// Rethrows the exception in flight with the op's name in front, keeping the library/user split.
[[noreturn]] void rethrow_named(const std::string& what_op) {
  try {
    throw;
  } catch (const LibraryError& e) {
    throw LibraryError(what_op + ": " + e.what());
  } catch (const InputError& e) {
    throw InputError(what_op + ": " + e.what());
  } catch (const std::exception& e) {
    throw Error(what_op + ": " + e.what());
  }
}

bool overlaps(std::span<const float> a, std::span<const float> b) {
  if (a.empty() || b.empty()) return false;
  return a.data() < b.data() + b.size() && b.data() < a.data() + a.size();
}
}  // namespace

// --- Work --------------------------------------------------------------------------------------

struct Work::State {
  std::unique_ptr<WorkImpl> impl;
  std::shared_ptr<Watchdog> watchdog;
  std::uint64_t token = 0;
  std::string name;  // describe(...) of the op
  bool completed = false;

  void finish() {
    completed = true;
    watchdog->done(token);
  }

  ~State() {
    if (completed) return;
    if (std::uncaught_exceptions() > 0) impl->abandon();
    try {
      impl->wait();
    } catch (...) {
      // Destruction cannot report; the error already reached (or will reach) the peers.
    }
    finish();
  }
};

Work::Work(std::unique_ptr<State> state) : state_(std::move(state)) {}
Work::~Work() = default;
Work::Work(Work&&) noexcept = default;

Work& Work::operator=(Work&& other) noexcept {
  if (this != &other) state_ = std::move(other.state_);  // the old op completes in ~State
  return *this;
}

void Work::wait() {
  if (!state_ || state_->completed) return;
  try {
    state_->impl->wait();
  } catch (...) {
    state_->finish();
    rethrow_named(state_->name);
  }
  state_->finish();
}

bool Work::is_completed() {
  if (!state_ || state_->completed) return true;
  bool done = false;
  try {
    done = state_->impl->test();
  } catch (...) {
    state_->finish();
    rethrow_named(state_->name);
  }
  if (done) state_->finish();
  return done;
}

// --- ProcessGroup ------------------------------------------------------------------------------

ProcessGroup::ProcessGroup(int rank, int size, const ProcessGroupOptions& options,
                           std::shared_ptr<Watchdog> watchdog)
    : rank_(rank), size_(size), timeout_(options.timeout), watchdog_(std::move(watchdog)) {
  NOEIRA_CHECK(size >= 1 && rank >= 0 && rank < size, "process group: rank ", rank, " of ", size);
  NOEIRA_CHECK(options.timeout > Milliseconds::zero(), "process group: timeout must be > 0");
  NOEIRA_CHECK(watchdog_ != nullptr, "process group: no watchdog");
}

ProcessGroup::~ProcessGroup() = default;

Work ProcessGroup::allreduce(std::span<float> buf, const CollectiveOptions& opts) {
  return run(Collective::AllReduce, buf, buf, 0, static_cast<std::int64_t>(buf.size()), opts);
}

Work ProcessGroup::reduce_scatter(std::span<const float> in, std::span<float> out,
                                  const CollectiveOptions& opts) {
  NOEIRA_CHECK(in.size() == out.size() * static_cast<std::size_t>(size_),
               "reduce_scatter: input of ", in.size(), " elements must be ", size_, " x output of ",
               out.size());
  const bool in_place = out.data() == in.data() + static_cast<std::size_t>(rank_) * out.size();
  NOEIRA_CHECK(in_place || !overlaps(in, out),
               "reduce_scatter: output overlaps input but is not this rank's segment");
  return run(Collective::ReduceScatter, in, out, 0, static_cast<std::int64_t>(out.size()), opts);
}

Work ProcessGroup::all_gather(std::span<const float> in, std::span<float> out,
                              const CollectiveOptions& opts) {
  NOEIRA_CHECK(out.size() == in.size() * static_cast<std::size_t>(size_), "all_gather: output of ",
               out.size(), " elements must be ", size_, " x input of ", in.size());
  const bool in_place = in.data() == out.data() + static_cast<std::size_t>(rank_) * in.size();
  NOEIRA_CHECK(in_place || !overlaps(in, out),
               "all_gather: input overlaps output but is not this rank's segment");
  return run(Collective::AllGather, in, out, 0, static_cast<std::int64_t>(in.size()), opts);
}

Work ProcessGroup::broadcast(std::span<float> buf, int root, const CollectiveOptions& opts) {
  NOEIRA_CHECK(root >= 0 && root < size_, "broadcast: root ", root, " out of ", size_, " ranks");
  return run(Collective::Broadcast, buf, buf, root, static_cast<std::int64_t>(buf.size()), opts);
}

Work ProcessGroup::barrier(const CollectiveOptions& opts) {
  return run(Collective::Barrier, {}, {}, 0, 0, opts);
}

Work ProcessGroup::run(Collective kind, std::span<const float> in, std::span<float> out, int root,
                       std::int64_t count, const CollectiveOptions& opts) {
  NOEIRA_CHECK(opts.timeout == kInheritTimeout || opts.timeout > Milliseconds::zero(),
               to_string(kind), ": timeout must be > 0 or kInheritTimeout");
  CollectiveCall call;
  call.kind = kind;
  call.seq = ++seq_;
  call.in = in;
  call.out = out;
  call.root = root;
  call.timeout = opts.timeout == kInheritTimeout ? timeout_ : opts.timeout;
  call.count = count;

  auto state = std::make_unique<Work::State>();
  state->watchdog = watchdog_;
  state->name = describe(kind, call.seq, rank_, size_);
  state->token = watchdog_->track(
      {kind, call.seq, rank_, count, std::chrono::steady_clock::now(), call.timeout});
  try {
    state->impl = start(call);
  } catch (...) {
    state->finish();
    rethrow_named(state->name);
  }
  tally_.ops[static_cast<std::size_t>(kind)] += 1;
  tally_.elements[static_cast<std::size_t>(kind)] += count;
  return Work(std::move(state));
}

}  // namespace noeira::dist
