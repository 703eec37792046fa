#include "distributed/mpi_shared_sums.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "distributed/mpi_check.hpp"
#include "distributed/mpi_ordered_sum.hpp"
#include "distributed/shard.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

// Each rank's counters, at the start of its part of the window, each on a cache line of its own
// (a peer polls one while the owner writes another). Only the owner writes them.
struct SharedSums::Counters {
  alignas(64) std::uint64_t arrived;
  alignas(64) std::uint64_t reduced;
  alignas(64) std::uint64_t released;
};

namespace {

constexpr std::size_t kCountersBytes = 256;  // Counters, rounded up to keep the region aligned
static_assert(sizeof(SharedSums::Counters) <= kCountersBytes);
// Small enough that a chunk, the peers' and the buffer's part stay in a core's L2 (on a 2-core
// Zen 5 machine 0.5 MiB moved 1–4 MiB allreduces at 1.5–2x the speed of 8 MiB regions).
constexpr double kDefaultRegionMiB = 0.5;

bool turned_on() {
  const char* v = std::getenv("NOEIRA_SHARED_MEMORY");
  return v == nullptr || std::string(v) != "0";
}

std::size_t region_bytes_wanted() {
  double mib = kDefaultRegionMiB;
  if (const char* v = std::getenv("NOEIRA_SHARED_MEMORY_MB")) {
    char* end = nullptr;
    mib = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(mib > 0.0) || mib > 4096.0) {
      throw InputError(detail::concat("NOEIRA_SHARED_MEMORY_MB must be a size in MiB from above 0 "
                                      "to 4096, got '", v, "'"));
    }
  }
  // Whole 64-byte lines, at least one element of any type per rank's slice.
  return std::max<std::size_t>(64, static_cast<std::size_t>(mib * 1024 * 1024) / 64 * 64);
}

std::uint64_t load(const std::uint64_t& counter) {
  return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(counter))
      .load(std::memory_order_acquire);
}

}  // namespace

std::unique_ptr<SharedSums> SharedSums::create(MPI_Comm comm, int rank, int size,
                                               MpiProgress& progress) {
  MPI_Comm node = MPI_COMM_NULL;
  NOEIRA_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  int node_size = 0;
  NOEIRA_MPI_CHECK(MPI_Comm_size(node, &node_size));
  NOEIRA_MPI_CHECK(MPI_Comm_free(&node));
  // Every rank must take the same path, whatever its environment says.
  int on = turned_on() && node_size == size && size > 1 ? 1 : 0;
  NOEIRA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &on, 1, MPI_INT, MPI_MIN, comm));
  if (!on) return nullptr;
  unsigned long long region = region_bytes_wanted();
  NOEIRA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &region, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, comm));

  MPI_Info info = MPI_INFO_NULL;
  NOEIRA_MPI_CHECK(MPI_Info_create(&info));
  // Each rank's part on its own pages (first touched by its owner: on its NUMA node).
  NOEIRA_MPI_CHECK(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
  void* base = nullptr;
  MPI_Win win = MPI_WIN_NULL;
  const int allocated = MPI_Win_allocate_shared(
      static_cast<MPI_Aint>(kCountersBytes + region), 1, info, comm, &base, &win);
  MPI_Info_free(&info);
  NOEIRA_MPI_CHECK(allocated);
  std::memset(base, 0, kCountersBytes);
  std::vector<char*> regions(static_cast<std::size_t>(size));
  std::vector<Counters*> counters(static_cast<std::size_t>(size));
  for (int q = 0; q < size; ++q) {
    MPI_Aint bytes = 0;
    int disp = 0;
    char* part = nullptr;
    NOEIRA_MPI_CHECK(MPI_Win_shared_query(win, q, &bytes, &disp, &part));
    counters[static_cast<std::size_t>(q)] = reinterpret_cast<Counters*>(part);
    regions[static_cast<std::size_t>(q)] = part + kCountersBytes;
  }
  NOEIRA_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
  NOEIRA_MPI_CHECK(MPI_Win_sync(win));
  NOEIRA_MPI_CHECK(MPI_Barrier(comm));  // every rank's counters are zero before any op
  return std::unique_ptr<SharedSums>(new SharedSums(
      win, comm, rank, size, region, std::move(regions), std::move(counters), progress));
}

SharedSums::SharedSums(MPI_Win win, MPI_Comm comm, int rank, int size, std::size_t region_bytes,
                       std::vector<char*> regions, std::vector<Counters*> counters,
                       MpiProgress& progress)
    : win_(win),
      comm_(comm),
      rank_(rank),
      size_(size),
      region_bytes_(region_bytes),
      regions_(std::move(regions)),
      counters_(std::move(counters)),
      progress_(progress),
      sources_(static_cast<std::size_t>(size)) {}

SharedSums::~SharedSums() {
  if (registered_) progress_.remove(this);
  // Collective: every rank frees the window at the group's end. Errors here cannot be reported.
  MPI_Win_unlock_all(win_);
  MPI_Win_free(&win_);
}

// --- The ops ---------------------------------------------------------------------------------

enum class Phase : std::uint8_t { Begin, Arrived, Reduced };

struct SharedSums::Op {
  CollectiveCall call;
  std::int64_t at = 0;  // first element (of the per-rank count) of the current chunk
  Phase phase = Phase::Begin;
  std::uint64_t epoch = 0;
  bool done = false;
};

// A started op's handle: its test() and wait() move the whole group on, this op included.
class SharedWork final : public WorkImpl {
 public:
  SharedWork(std::shared_ptr<SharedSums::Op> op, SharedSums& sums)
      : op_(std::move(op)), sums_(sums) {}

  bool test() override {
    sums_.progress_.advance();
    return op_->done;
  }

  void wait() override {
    for (int looks = 0;; ++looks) {
      sums_.progress_.advance();
      if (op_->done) return;
      // Open MPI moves its own non-blocking ops (a broadcast a peer waits for) only inside MPI
      // calls: one that returns at once keeps them moving while this rank waits here.
      int flag = 0;
      NOEIRA_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, sums_.comm_, &flag,
                                  MPI_STATUS_IGNORE));
      // A short spin for a peer about to arrive, then the core goes to whoever needs it.
      if (looks >= 64) sched_yield();
    }
  }

 private:
  std::shared_ptr<SharedSums::Op> op_;
  SharedSums& sums_;
};

bool SharedSums::all_reached(std::uint64_t Counters::*which, std::uint64_t value) const {
  for (const Counters* c : counters_) {
    if (load(c->*which) < value) return false;
  }
  return true;
}

void SharedSums::raise(std::uint64_t Counters::*which, std::uint64_t value) {
  std::atomic_ref<std::uint64_t>(counters_[static_cast<std::size_t>(rank_)]->*which)
      .store(value, std::memory_order_release);
}

std::unique_ptr<WorkImpl> SharedSums::start(const CollectiveCall& call) {
  auto op = std::make_shared<Op>();
  op->call = call;
  queue_.push_back(op);
  if (!registered_) {
    progress_.add(this);
    registered_ = true;
  }
  return std::make_unique<SharedWork>(std::move(op), *this);
}

bool SharedSums::advance() {
  move_queue();
  if (!queue_.empty()) return false;
  registered_ = false;  // MpiProgress drops an op whose advance() says true
  return true;
}

void SharedSums::move_queue() {
  while (!queue_.empty() && step(*queue_.front())) {
    queue_.front()->done = true;
    queue_.pop_front();
  }
}

std::int64_t SharedSums::chunk_of(const Op& op) const {
  const auto elements = static_cast<std::int64_t>(region_bytes_ / dtype_size(op.call.out.dtype));
  // A reduce-scatter's chunk holds every rank's share of it.
  if (op.call.kind == Collective::ReduceScatter) return std::max<std::int64_t>(1, elements / size_);
  return elements;
}

bool SharedSums::step(Op& op) {
  const std::int64_t chunk = chunk_of(op);
  while (op.at < op.call.count) {
    const std::int64_t n = std::min(chunk, op.call.count - op.at);
    switch (op.phase) {
      case Phase::Begin:
        // Every peer has read what the last chunk left in this rank's region.
        if (!all_reached(&Counters::released, epoch_)) return false;
        op.epoch = ++epoch_;
        copy_in(op, n);
        raise(&Counters::arrived, op.epoch);
        op.phase = Phase::Arrived;
        [[fallthrough]];
      case Phase::Arrived:
        if (!all_reached(&Counters::arrived, op.epoch)) return false;
        fold(op, n);
        if (op.call.kind == Collective::AllReduce) {
          raise(&Counters::reduced, op.epoch);
          op.phase = Phase::Reduced;
          [[fallthrough]];
        } else {
          raise(&Counters::released, op.epoch);
          break;
        }
      case Phase::Reduced:
        if (!all_reached(&Counters::reduced, op.epoch)) return false;
        copy_out(op, n);
        raise(&Counters::released, op.epoch);
        break;
    }
    op.at += n;
    op.phase = Phase::Begin;
  }
  return true;
}

// Chunk [at, at + n) of this rank's data into its region.
void SharedSums::copy_in(const Op& op, std::int64_t n) {
  const std::size_t elem = dtype_size(op.call.out.dtype);
  const std::size_t bytes = static_cast<std::size_t>(n) * elem;
  const std::size_t from = static_cast<std::size_t>(op.at) * elem;
  char* mine = regions_[static_cast<std::size_t>(rank_)];
  if (op.call.kind == Collective::ReduceScatter) {
    // Segment q's chunk at q·bytes, for the peer q that folds it: this rank folds its own segment
    // from its buffer. All of it before out is written: in place, out is this rank's segment.
    const std::size_t segment = static_cast<std::size_t>(op.call.count) * elem;
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      std::memcpy(mine + static_cast<std::size_t>(q) * bytes,
                  op.call.in.bytes_begin() + static_cast<std::size_t>(q) * segment + from, bytes);
    }
  } else if (op.call.kind == Collective::AllReduce) {
    // Only the slices the peers fold: this rank folds its own from its buffer.
    const Range slice = even_part(n, size_, rank_);
    const std::size_t head = static_cast<std::size_t>(slice.begin) * elem;
    const std::size_t tail = static_cast<std::size_t>(slice.end) * elem;
    const char* in = op.call.in.bytes_begin() + from;
    std::memcpy(mine, in, head);
    std::memcpy(mine + tail, in + tail, bytes - tail);
  } else {
    std::memcpy(mine, op.call.in.bytes_begin() + from, bytes);
  }
}

// Once every rank's chunk is in: the allreduce folds this rank's slice over its own region (only
// this rank reads that slice until `reduced`), the reduce-scatter this rank's share into out, and
// the all-gather copies every rank's chunk into its segment of out.
void SharedSums::fold(const Op& op, std::int64_t n) {
  const DType dtype = op.call.out.dtype;
  const std::size_t elem = dtype_size(dtype);
  const std::size_t from = static_cast<std::size_t>(op.at) * elem;
  char* out = static_cast<char*>(op.call.out.data);
  std::vector<const char*>& sources = sources_;
  switch (op.call.kind) {
    case Collective::AllReduce: {
      const Range slice = even_part(n, size_, rank_);
      const std::size_t offset = static_cast<std::size_t>(slice.begin) * elem;
      for (std::size_t q = 0; q < sources.size(); ++q) sources[q] = regions_[q] + offset;
      sources[static_cast<std::size_t>(rank_)] = out + from + offset;
      fold_in_rank_order(dtype, regions_[static_cast<std::size_t>(rank_)] + offset, sources,
                         slice.size());
      return;
    }
    case Collective::ReduceScatter: {
      const std::size_t share = static_cast<std::size_t>(rank_) * static_cast<std::size_t>(n) * elem;
      for (std::size_t q = 0; q < sources.size(); ++q) sources[q] = regions_[q] + share;
      // In place, out is this source: the fold reads every source of a tile before writing it.
      const std::size_t segment = static_cast<std::size_t>(op.call.count) * elem;
      sources[static_cast<std::size_t>(rank_)] =
          op.call.in.bytes_begin() + static_cast<std::size_t>(rank_) * segment + from;
      fold_in_rank_order(dtype, out + from, sources, n);
      return;
    }
    case Collective::AllGather: {
      const std::size_t segment = static_cast<std::size_t>(op.call.count) * elem;
      const std::size_t bytes = static_cast<std::size_t>(n) * elem;
      for (int q = 0; q < size_; ++q) {
        char* to = out + static_cast<std::size_t>(q) * segment + from;
        // In place, this rank's segment of out is its in: already there.
        if (q == rank_ && to == op.call.in.bytes_begin() + from) continue;
        std::memcpy(to, regions_[static_cast<std::size_t>(q)], bytes);
      }
      return;
    }
    case Collective::Broadcast:
    case Collective::Barrier:
      break;
  }
  throw Error(detail::concat("shared-memory collectives: no ", to_string(op.call.kind)));
}

// The allreduce's last phase: every rank's folded slice of the chunk into the buffer.
void SharedSums::copy_out(const Op& op, std::int64_t n) {
  const std::size_t elem = dtype_size(op.call.out.dtype);
  char* part = static_cast<char*>(op.call.out.data) + static_cast<std::size_t>(op.at) * elem;
  for (int q = 0; q < size_; ++q) {
    const Range theirs = even_part(n, size_, q);
    const std::size_t from = static_cast<std::size_t>(theirs.begin) * elem;
    std::memcpy(part + from, regions_[static_cast<std::size_t>(q)] + from,
                static_cast<std::size_t>(theirs.size()) * elem);
  }
}

}  // namespace noeira::dist
