#include "distributed/process_group.hpp"

#include <algorithm>
#include <exception>
#include <type_traits>

#include "distributed/watchdog.hpp"
#include "kernels/error.hpp"
#include "kernels/kernel_table.hpp"

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

bool overlaps(ConstBuffer a, ConstBuffer b) {
  if (a.count == 0 || b.count == 0) return false;
  return a.bytes_begin() < b.bytes_begin() + b.bytes() &&
         b.bytes_begin() < a.bytes_begin() + a.bytes();
}

// Whether `part` is exactly segment `index` of `whole` (of part.count elements each).
bool is_segment(ConstBuffer part, ConstBuffer whole, int index) {
  return part.dtype == whole.dtype &&
         part.bytes_begin() == whole.bytes_begin() + static_cast<std::size_t>(index) * part.bytes();
}

void check_same_dtype(Collective kind, ConstBuffer in, Buffer out) {
  NOEIRA_CHECK(in.dtype == out.dtype, to_string(kind), ": input is ", to_string(in.dtype),
               ", output is ", to_string(out.dtype));
}
}  // namespace

template <class Pointer>
TypedBuffer<Pointer> TypedBuffer<Pointer>::sub(std::size_t first, std::size_t n) const {
  NOEIRA_CHECK(first + n <= count, "buffer of ", count, " elements: no sub-buffer [", first, ", ",
               first + n, ")");
  using Byte = std::conditional_t<std::is_const_v<std::remove_pointer_t<Pointer>>, const char, char>;
  TypedBuffer b = *this;
  b.data = static_cast<Byte*>(data) + first * dtype_size(dtype);
  b.count = n;
  return b;
}
template struct TypedBuffer<void*>;
template struct TypedBuffer<const void*>;

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

Work ProcessGroup::allreduce(Buffer buf, const CollectiveOptions& opts) {
  return run(Collective::AllReduce, buf, buf, 0, static_cast<std::int64_t>(buf.count), opts);
}

Work ProcessGroup::reduce_scatter(ConstBuffer in, Buffer out, const CollectiveOptions& opts) {
  check_same_dtype(Collective::ReduceScatter, in, out);
  NOEIRA_CHECK(in.count == out.count * static_cast<std::size_t>(size_),
               "reduce_scatter: input of ", in.count, " elements must be ", size_, " x output of ",
               out.count);
  NOEIRA_CHECK(is_segment(out, in, rank_) || !overlaps(in, out),
               "reduce_scatter: output overlaps input but is not this rank's segment");
  return run(Collective::ReduceScatter, in, out, 0, static_cast<std::int64_t>(out.count), opts);
}

Work ProcessGroup::all_gather(ConstBuffer in, Buffer out, const CollectiveOptions& opts) {
  check_same_dtype(Collective::AllGather, in, out);
  NOEIRA_CHECK(out.count == in.count * static_cast<std::size_t>(size_), "all_gather: output of ",
               out.count, " elements must be ", size_, " x input of ", in.count);
  NOEIRA_CHECK(is_segment(in, out, rank_) || !overlaps(in, out),
               "all_gather: input overlaps output but is not this rank's segment");
  return run(Collective::AllGather, in, out, 0, static_cast<std::int64_t>(in.count), opts);
}

Work ProcessGroup::broadcast(Buffer buf, int root, const CollectiveOptions& opts) {
  NOEIRA_CHECK(root >= 0 && root < size_, "broadcast: root ", root, " out of ", size_, " ranks");
  return run(Collective::Broadcast, buf, buf, root, static_cast<std::int64_t>(buf.count), opts);
}

void* ProcessGroup::staging(std::size_t bytes, const KernelTable& k) {
  if (bytes > staging_bytes_) {
    const std::size_t grown = std::max<std::size_t>(bytes, 256);
    staging_ = std::shared_ptr<void>(k.allocate(grown), [release = k.release](void* p) {
      if (p != nullptr) release(p);
    });
    staging_bytes_ = grown;
  }
  return staging_.get();
}

Work ProcessGroup::barrier(const CollectiveOptions& opts) {
  return run(Collective::Barrier, {}, {}, 0, 0, opts);
}

Work ProcessGroup::run(Collective kind, ConstBuffer in, Buffer out, int root, std::int64_t count,
                       const CollectiveOptions& opts) {
  NOEIRA_CHECK(opts.timeout == kInheritTimeout || opts.timeout > Milliseconds::zero(),
               to_string(kind), ": timeout must be > 0 or kInheritTimeout");
  check_same_dtype(kind, in, out);
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
  tally_.bytes[static_cast<std::size_t>(kind)] +=
      count * static_cast<std::int64_t>(dtype_size(out.dtype));
  return Work(std::move(state));
}

}  // namespace noeira::dist
