#pragma once
// The collective interface every sharding policy talks to (c10d-like). One shape per op:
//   op(buffers, const CollectiveOptions& = {}) -> Work
// A buffer is a typed span: pointer, element count and DType together (Buffer / ConstBuffer, made
// from any std::span of float, double, int32, int64 or bf16 bits), so element counts travel with
// their type and never as bytes; fp32 carries tensors, fp64 and int64 carry host scalars (loss
// sums, counters) exactly, bf16 carries gradients on the wire (--reduce-dtype bf16). Reductions
// are sums and the caller applies 1/N: in the buffer's type, except bf16, whose sums accumulate
// in fp32 and round to bf16 once, at the end: element e of a bf16 sum is
//   bf16( ((fp32(in_0[e]) + fp32(in_1[e])) + ...) + fp32(in_{N-1}[e]) )
// on every backend (NCCL included), so a bf16 reduction loses no more than its inputs' and its
// result's rounding, whatever N. That fold is in rank order on one node; on several, the MPI and
// simulated backends add node by node (distributed/node_layout.hpp), while NCCL's group knows no
// nodes and keeps the flat rank order, so across nodes its bf16 sums are not the MPI backend's
// bits. Backends: MPI (real processes), simulated (threads in one process),
// NCCL (real processes, device buffers: the spans hold device addresses). A group's buffers live
// on one target (buffer_target()); small host values (loss sums, flags) go through
// allreduce_host / all_gather_host (distributed/host_collectives.hpp), which stage them on the
// device where the group needs it.
//
// Contract of Work, the asynchronous handle:
//  - the op may still be running when the call returns: the caller must not read or write the
//    buffers it passed until wait() returned (or is_completed() said true);
//  - wait() blocks until the op is complete on this rank and rethrows its error, naming the
//    collective, its sequence number and the rank; is_completed() never blocks and also rethrows;
//  - a Work destroyed before completion waits for it (buffers must outlive it) and swallows its
//    error; destroyed while an exception unwinds, it first tells the backend this rank is failing
//    so that peers fail fast instead of waiting for it.
//
// Every op runs through one private funnel (ProcessGroup::run) that checks preconditions,
// assigns the per-group sequence number (the first collective of a group is #1), registers the
// op with the watchdog and wraps backend errors. All ranks must call the same ops in the same
// order with the same counts; the watchdog turns a violation (a hang or a mismatch) into an error.
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "kernels/target.hpp"

namespace noeira {
struct KernelTable;
}

namespace noeira::dist {

class Watchdog;

// A collective's buffer: where, how many elements, of which type. Made from a span (or any
// contiguous range), so the count is the range's and the type is the element type's. Buffer is
// writable memory (an output); ConstBuffer is an input, made from either.
template <class Pointer>  // void* or const void*
struct TypedBuffer {
  Pointer data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::F32;

  TypedBuffer() = default;
  template <class R>
    requires std::ranges::contiguous_range<R> && std::ranges::sized_range<R>
  TypedBuffer(R&& r)  // NOLINT: implicit, as a span would be
      : data(std::ranges::data(r)),
        count(std::ranges::size(r)),
        dtype(dtype_of<std::ranges::range_value_t<R>>) {}
  // An output buffer read as an input.
  template <class Other>
    requires(!std::is_same_v<Other, Pointer> && std::is_convertible_v<Other, Pointer>)
  TypedBuffer(TypedBuffer<Other> b) : data(b.data), count(b.count), dtype(b.dtype) {}  // NOLINT

  std::size_t bytes() const { return count * dtype_size(dtype); }
  const char* bytes_begin() const { return static_cast<const char*>(data); }
  // The same buffer, `first` elements in, `n` long (element arithmetic in the buffer's type).
  TypedBuffer sub(std::size_t first, std::size_t n) const;
};

using Buffer = TypedBuffer<void*>;
using ConstBuffer = TypedBuffer<const void*>;

using Milliseconds = std::chrono::milliseconds;

// The "inherit the group's timeout" value of CollectiveOptions::timeout.
inline constexpr Milliseconds kInheritTimeout{-1};
// The group timeout when none is given: long enough for a slow step, short enough to notice.
inline constexpr Milliseconds kDefaultTimeout = std::chrono::minutes(5);

enum class Collective : std::uint8_t { AllReduce, ReduceScatter, AllGather, Broadcast, Barrier };

inline constexpr std::size_t kCollectiveKinds = 5;

std::string_view to_string(Collective c);

// What this rank handed to a group's collectives: per kind, the ops started and the elements per
// rank they moved (CollectiveCall::count), and those elements' bytes. distributed/comm_volume.hpp
// turns it into elements sent; the funnel counts, so every backend is counted alike.
struct CollectiveTally {
  std::array<std::uint64_t, kCollectiveKinds> ops{};
  std::array<std::int64_t, kCollectiveKinds> elements{};
  std::array<std::int64_t, kCollectiveKinds> bytes{};

  std::uint64_t ops_of(Collective c) const { return ops[static_cast<std::size_t>(c)]; }
  std::int64_t elements_of(Collective c) const { return elements[static_cast<std::size_t>(c)]; }
  std::int64_t bytes_of(Collective c) const { return bytes[static_cast<std::size_t>(c)]; }
};

struct CollectiveOptions {
  Milliseconds timeout = kInheritTimeout;
};

struct ProcessGroupOptions {
  Milliseconds timeout = kDefaultTimeout;  // for every op whose options inherit
};

// One op as the funnel hands it to a backend. For allreduce and broadcast, in and out are the
// same buffer; for barrier both are empty. in and out have the same dtype (the funnel checks).
struct CollectiveCall {
  Collective kind = Collective::Barrier;
  std::uint64_t seq = 0;
  ConstBuffer in;
  Buffer out;
  int root = 0;
  Milliseconds timeout{0};
  // Elements per rank that the op moves: the buffer for allreduce / broadcast, the shard for
  // reduce-scatter / all-gather, 0 for barrier. Equal on every rank of a well-formed call.
  std::int64_t count = 0;
};

// A backend's handle on one started op.
class WorkImpl {
 public:
  virtual ~WorkImpl() = default;
  // True when complete; throws the op's error. Never blocks.
  virtual bool test() = 0;
  // Blocks until complete; throws the op's error.
  virtual void wait() = 0;
  // This rank is failing with the op in flight: make peers fail fast (simulated backend).
  virtual void abandon() noexcept {}
};

class Work {
 public:
  Work() = default;  // an already completed op
  Work(Work&&) noexcept;
  Work& operator=(Work&& other) noexcept;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  ~Work();

  void wait();
  bool is_completed();

  struct State;

 private:
  friend class ProcessGroup;
  explicit Work(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  Milliseconds timeout() const { return timeout_; }
  // Sequence number of the last op this group started (0 before the first).
  std::uint64_t last_seq() const { return seq_; }
  // "mpi", "nccl" or "simulated".
  virtual std::string_view backend() const = 0;
  // The nodes the ranks sum over (distributed/node_layout.hpp), as "2 nodes of 4 ranks"; empty
  // for one node.
  virtual std::string nodes() const { return {}; }
  // Where the buffers of this group's ops must live: Cpu for MPI, Cuda for NCCL, the simulated
  // world's target.
  virtual Target buffer_target() const = 0;
  // Whether this group's ops see the work a rank enqueued on `compute` before starting them. The
  // NCCL group waits for the one stream it was made with; host and simulated backends wait for
  // any stream a rank computes on (distributed/rank_stream.hpp).
  virtual bool ordered_after(Stream /*compute*/) const { return true; }
  // Ops started on this rank since construction or the last reset_tally().
  const CollectiveTally& tally() const { return tally_; }
  void reset_tally() { tally_ = {}; }

  // At least `bytes` of buffer_target() memory for staging host values (host_collectives.hpp),
  // allocated by `kernels` (those of buffer_target()): kept and grown, never freed per call,
  // because a device free synchronizes the device.
  void* staging(std::size_t bytes, const KernelTable& kernels);

  // `bytes` of buffer_target() memory that this group's ops may read in place, or null where the
  // backend has none (then any memory serves alike): ranks over MPI on one node get memory their
  // peers map (mpi_shared_sums.hpp), which spares the ops a copy. Alive while the pointer is (its
  // get() is the memory). Collective: every rank calls it at the same point of its ops.
  virtual std::shared_ptr<void> shared_memory(std::size_t /*bytes*/) { return nullptr; }

  // buf = sum over ranks of buf.
  Work allreduce(Buffer buf, const CollectiveOptions& opts = {});
  // out = rank r's segment [r·out.count, (r+1)·out.count) of the sum over ranks of in;
  // in.count == out.count·size(). In place when out is exactly this rank's segment of in (the
  // rest of in is then unspecified afterwards); any other overlap is refused.
  Work reduce_scatter(ConstBuffer in, Buffer out, const CollectiveOptions& opts = {});
  // out segment q = rank q's in; out.count == in.count·size(). In place when in is exactly this
  // rank's segment of out; any other overlap is refused.
  Work all_gather(ConstBuffer in, Buffer out, const CollectiveOptions& opts = {});
  // buf = root's buf.
  Work broadcast(Buffer buf, int root, const CollectiveOptions& opts = {});
  // Completes once every rank has entered it.
  Work barrier(const CollectiveOptions& opts = {});

 protected:
  ProcessGroup(int rank, int size, const ProcessGroupOptions& options,
               std::shared_ptr<Watchdog> watchdog);

  // The backend's start of one op. Called by the funnel only, with preconditions checked.
  virtual std::unique_ptr<WorkImpl> start(const CollectiveCall& call) = 0;

 private:
  Work run(Collective kind, ConstBuffer in, Buffer out, int root, std::int64_t count,
           const CollectiveOptions& opts);

  int rank_;
  int size_;
  Milliseconds timeout_;
  std::uint64_t seq_ = 0;
  CollectiveTally tally_;
  std::shared_ptr<Watchdog> watchdog_;
  std::shared_ptr<void> staging_;  // buffer_target() memory, staging_bytes_ long
  std::size_t staging_bytes_ = 0;
};

// "allreduce #17 (rank 0 of 2)": how errors name an op.
std::string describe(Collective kind, std::uint64_t seq, int rank, int size);

}  // namespace noeira::dist
