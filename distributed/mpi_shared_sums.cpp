#include "distributed/mpi_shared_sums.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "distributed/mpi_check.hpp"
#include "distributed/mpi_ordered_sum.hpp"
#include "distributed/shard.hpp"
#include "kernels/cpu/stream_copy.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

// Each rank's counters, at the start of its part of the window, each on a cache line of its own
// (a peer polls one while the owner writes another). Only the owner writes them.
struct SharedSums::Counters {
  alignas(64) std::uint64_t arrived;
  alignas(64) std::uint64_t reduced;
  alignas(64) std::uint64_t released;
  // What the op whose first chunk is `arrived` is, written before it is raised: the peers check
  // that every rank runs the same op, and whether in place, before they read anything.
  alignas(64) OpHeader header;
};

namespace {

// Frees a window of map_window() (collective), unless this rank is failing (its peers are not
// freeing it) or MPI is gone. Errors here cannot be reported.
void free_window(MPI_Win& win) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || std::uncaught_exceptions() > 0) return;
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
}

}  // namespace

// A window of memory every rank maps; its own bytes are the buffers a rank's tensors take.
struct SharedSums::Block {
  MPI_Win win = MPI_WIN_NULL;
  std::uint64_t id = 0;            // allocation number in the group, from 1: the same on every rank
  std::vector<char*> bases;        // [ranks] each rank's part, mapped here
  std::vector<std::size_t> sizes;  // [ranks]

  Block() = default;
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  // Collective: the last tensor on it goes at the same point on every rank.
  ~Block() { free_window(win); }
};

namespace {

constexpr std::size_t kCountersBytes = 320;  // Counters, rounded up to keep the region aligned
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

void store_relaxed(std::uint64_t& field, std::uint64_t value) {
  std::atomic_ref<std::uint64_t>(field).store(value, std::memory_order_relaxed);
}

std::uint64_t load_relaxed(const std::uint64_t& field) {
  return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(field))
      .load(std::memory_order_relaxed);
}

// A window whose every rank's part is mapped here, each part starting on a cache line (MPI gives
// parts at any 8-byte offset; the page offset, and so the alignment, is the same in every
// process that maps them, so every rank finds the same bytes).
struct MappedWindow {
  MPI_Win win = MPI_WIN_NULL;
  std::vector<char*> parts;        // [ranks]
  std::vector<std::size_t> sizes;  // [ranks] usable bytes from parts[q]
};

constexpr std::size_t kLine = 64;

MappedWindow map_window(MPI_Comm comm, int size, std::size_t bytes) {
  MPI_Info info = MPI_INFO_NULL;
  NOEIRA_MPI_CHECK(MPI_Info_create(&info));
  // Each rank's part on its own pages (first touched by its owner: on its NUMA node).
  NOEIRA_MPI_CHECK(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
  void* base = nullptr;
  MappedWindow w;
  const int allocated = MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes + kLine), 1, info,
                                                comm, &base, &w.win);
  MPI_Info_free(&info);
  // The call names what failed: a shared window (its backing file, in Open MPI's
  // osc_sm_backing_directory), which NOEIRA_SHARED_MEMORY=0 does without.
  if (allocated != MPI_SUCCESS) {
    mpi_fail(allocated,
             "MPI_Win_allocate_shared (the shared-memory collectives' window; "
             "NOEIRA_SHARED_MEMORY=0 runs without one)",
             __FILE__, __LINE__);
  }
  w.parts.resize(static_cast<std::size_t>(size));
  w.sizes.resize(static_cast<std::size_t>(size));
  for (int q = 0; q < size; ++q) {
    MPI_Aint part_bytes = 0;
    int disp = 0;
    char* part = nullptr;
    NOEIRA_MPI_CHECK(MPI_Win_shared_query(w.win, q, &part_bytes, &disp, &part));
    const std::size_t skip = (kLine - reinterpret_cast<std::uintptr_t>(part) % kLine) % kLine;
    w.parts[static_cast<std::size_t>(q)] = part + skip;
    w.sizes[static_cast<std::size_t>(q)] = static_cast<std::size_t>(part_bytes) - skip;
  }
  NOEIRA_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, w.win));
  return w;
}

// "allreduce #12 of 1000 fp32 (shared block 3 at byte 4096)", for the mismatch error.
std::string describe(const SharedSums::OpHeader& h) {
  const auto kind = static_cast<Collective>(h.kind);
  const auto dtype = static_cast<DType>(h.dtype);
  return detail::concat(to_string(kind), " #", h.seq, " of ", h.count, " ", to_string(dtype),
                        h.block == 0 ? std::string(" (a private buffer)")
                                     : detail::concat(" (shared block ", h.block, " at byte ",
                                                      h.offset, ")"));
}

}  // namespace

std::uint64_t shared_window_free_bytes() {
  const char* dir = std::getenv("OMPI_MCA_osc_sm_backing_directory");
  struct statvfs fs {};
  if (statvfs(dir != nullptr && *dir != '\0' ? dir : "/dev/shm", &fs) != 0) return 0;
  return static_cast<std::uint64_t>(fs.f_bavail) * static_cast<std::uint64_t>(fs.f_frsize);
}

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

  MappedWindow w = map_window(comm, size, kCountersBytes + region);
  MPI_Win win = w.win;
  std::memset(w.parts[static_cast<std::size_t>(rank)], 0, kCountersBytes);
  std::vector<char*> regions(static_cast<std::size_t>(size));
  std::vector<Counters*> counters(static_cast<std::size_t>(size));
  for (std::size_t q = 0; q < w.parts.size(); ++q) {
    counters[q] = reinterpret_cast<Counters*>(w.parts[q]);
    regions[q] = w.parts[q] + kCountersBytes;
  }
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
  free_window(win_);  // every rank at the group's end
}

// --- The ops ---------------------------------------------------------------------------------

enum class Phase : std::uint8_t { Begin, Arrived, Reduced, Released };

struct SharedSums::Op {
  CollectiveCall call;
  // In place: the buffer the peers touch (an all-gather's output, the others' input) lies in
  // this block on every rank, `offset` bytes into this rank's part; `offsets` [ranks] where each
  // rank's lies, as the ranks published them.
  std::shared_ptr<Block> block;
  std::size_t offset = 0;
  std::vector<std::size_t> offsets;
  std::int64_t at = 0;  // through the regions: first element (of the per-rank count) of the chunk
  Phase phase = Phase::Begin;
  std::uint64_t epoch = 0;  // through the regions, of the current chunk; in place, of the op
  bool done = false;
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

SharedSums::SharedBuffer SharedSums::allocate(std::size_t bytes) {
  auto block = std::make_shared<Block>();
  block->id = ++allocations_;
  MappedWindow w = map_window(comm_, size_, bytes);
  block->win = w.win;
  block->bases = std::move(w.parts);
  block->sizes = std::move(w.sizes);
  std::erase_if(blocks_, [](const std::weak_ptr<Block>& b) { return b.expired(); });
  blocks_.push_back(block);
  char* mine = block->bases[static_cast<std::size_t>(rank_)];
  return {mine, std::shared_ptr<void>(block, mine)};
}

std::unique_ptr<WorkImpl> SharedSums::start(const CollectiveCall& call) {
  auto op = std::make_shared<Op>();
  op->call = call;
  // In place when the buffer the peers will touch (an all-gather's output, the others' input)
  // lies in this rank's part of a block (the peers check that theirs does too before anything is
  // read). Every size: since an allreduce pushes its folded slice, in place is no slower than the
  // regions even at 1 KiB (2 ranks: 1.3–1.8 µs against 1.8; 4 ranks on 2 cores: 7.6–7.8 against
  // 8.0–8.3), and faster from 4 KiB on.
  const bool gather = call.kind == Collective::AllGather;
  const char* shared = gather ? static_cast<const char*>(call.out.data) : call.in.bytes_begin();
  const std::size_t bytes = gather ? call.out.bytes() : call.in.bytes();
  if (bytes > 0) {
    for (const std::weak_ptr<Block>& weak : blocks_) {
      std::shared_ptr<Block> block = weak.lock();
      if (!block) continue;
      const char* mine = block->bases[static_cast<std::size_t>(rank_)];
      const std::size_t size = block->sizes[static_cast<std::size_t>(rank_)];
      if (shared >= mine && shared + bytes <= mine + size) {
        op->block = std::move(block);
        op->offset = static_cast<std::size_t>(shared - mine);
        break;
      }
    }
  }
  queue_.push_back(op);
  if (!registered_) {
    progress_.add(this);
    registered_ = true;
  }
  return std::make_unique<QueuedWork<Op>>(std::move(op), progress_, comm_);
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

void SharedSums::publish_header(const Op& op) {
  OpHeader& h = counters_[static_cast<std::size_t>(rank_)]->header;
  store_relaxed(h.seq, op.call.seq);
  store_relaxed(h.kind, static_cast<std::uint64_t>(op.call.kind));
  store_relaxed(h.dtype, static_cast<std::uint64_t>(op.call.out.dtype));
  store_relaxed(h.count, static_cast<std::uint64_t>(op.call.count));
  store_relaxed(h.block, op.block ? op.block->id : 0);
  store_relaxed(h.offset, op.offset);
}

void SharedSums::check_headers(Op& op) const {
  const OpHeader& mine = counters_[static_cast<std::size_t>(rank_)]->header;
  if (op.block) op.offsets.resize(static_cast<std::size_t>(size_));
  for (int q = 0; q < size_; ++q) {
    const OpHeader& theirs = counters_[static_cast<std::size_t>(q)]->header;
    const OpHeader peer{load_relaxed(theirs.seq),   load_relaxed(theirs.kind),
                        load_relaxed(theirs.dtype), load_relaxed(theirs.count),
                        load_relaxed(theirs.block), load_relaxed(theirs.offset)};
    const bool same = peer.seq == mine.seq && peer.kind == mine.kind &&
                      peer.dtype == mine.dtype && peer.count == mine.count &&
                      peer.block == mine.block;
    if (!same) {
      throw Error(detail::concat("shared-memory collectives: rank ", q, " runs ", describe(peer),
                                 " where rank ", rank_, " runs ", describe(mine),
                                 " (every rank must pass the same op, its shared buffer in memory "
                                 "from the same shared_memory call or in none)"));
    }
    if (!op.block) continue;
    const std::size_t part = op.block->sizes[static_cast<std::size_t>(q)];
    const std::size_t touched =
        op.call.kind == Collective::AllGather ? op.call.out.bytes() : op.call.in.bytes();
    if (peer.offset > part || touched > part - peer.offset) {
      throw Error(detail::concat("shared-memory collectives: rank ", q, "'s ", describe(peer),
                                 " reaches past its part of the block (", part, " bytes)"));
    }
    op.offsets[static_cast<std::size_t>(q)] = peer.offset;
  }
}

bool SharedSums::step(Op& op) {
  if (op.block) return step_in_place(op);
  const std::int64_t chunk = chunk_of(op);
  while (op.at < op.call.count) {
    const std::int64_t n = std::min(chunk, op.call.count - op.at);
    switch (op.phase) {
      case Phase::Begin:
        // Every peer has read what the last chunk left in this rank's region.
        if (!all_reached(&Counters::released, epoch_)) return false;
        op.epoch = ++epoch_;
        if (op.at == 0) publish_header(op);
        copy_in(op, n);
        raise(&Counters::arrived, op.epoch);
        op.phase = Phase::Arrived;
        [[fallthrough]];
      case Phase::Arrived:
        if (!all_reached(&Counters::arrived, op.epoch)) return false;
        if (op.at == 0) check_headers(op);
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
      case Phase::Released:
        break;
    }
    op.at += n;
    op.phase = Phase::Begin;
  }
  return true;
}

// Every rank reads its peers' inputs where they lie and writes the results where they go: no
// copy in, no copy out. A reduce-scatter folds this rank's segment from the peers' inputs; an
// all-gather writes this rank's input into every peer's output; an allreduce folds this rank's
// slice over its own buffer and writes it into the same slice of every peer's buffer (pushed),
// chunk by chunk (each rank folding a region's worth of its slice), so that the folded slice is
// still in cache when it is pushed. No rank waits for another in between: only this rank reads
// the peers' buffers at its slice, and only its owner reads a rank's buffer at its own slice, so
// the push overwrites nothing anyone still reads. Since a peer reads or writes this rank's buffer
// until it raises `released`, the op completes only when every peer has. One epoch per op.
bool SharedSums::step_in_place(Op& op) {
  if (op.phase == Phase::Begin) {
    if (!all_reached(&Counters::released, epoch_)) return false;
    op.epoch = ++epoch_;
    publish_header(op);
    raise(&Counters::arrived, op.epoch);
    op.phase = Phase::Arrived;
  }
  if (op.phase == Phase::Arrived) {
    if (!all_reached(&Counters::arrived, op.epoch)) return false;
    check_headers(op);
    if (op.call.kind == Collective::AllReduce) {
      const std::int64_t chunk = chunk_in_place(op);
      for (std::int64_t at = 0; at < op.call.count; at += chunk) {
        const std::int64_t n = std::min(chunk, op.call.count - at);
        fold_in_place(op, at, n);
        push_in_place(op, at, n);
      }
    } else {
      fold_in_place(op, 0, op.call.count);
    }
    raise(&Counters::released, op.epoch);
    op.phase = Phase::Released;
  }
  return all_reached(&Counters::released, op.epoch);
}

std::int64_t SharedSums::chunk_in_place(const Op& op) const {
  const auto region = static_cast<std::int64_t>(region_bytes_ / dtype_size(op.call.out.dtype));
  return std::max<std::int64_t>(1, region * size_);
}

// Peer q's buffer of the op (an all-gather's output, the others' input) in q's part of the block.
char* SharedSums::peer_buffer(const Op& op, std::size_t q) const {
  return op.block->bases[q] + op.offsets[q];
}

// Elements [at, at + n) of the op (an allreduce's chunk; the whole of the others): this rank's
// slice of the allreduce's chunk folded over its own buffer (the peers read only their slices of
// it), its segment of the reduce-scatter, every rank's input of the all-gather.
void SharedSums::fold_in_place(const Op& op, std::int64_t at, std::int64_t n) {
  const DType dtype = op.call.out.dtype;
  const std::size_t elem = dtype_size(dtype);
  const std::size_t count = static_cast<std::size_t>(op.call.count);
  char* out = static_cast<char*>(op.call.out.data);
  std::vector<const char*>& sources = sources_;
  switch (op.call.kind) {
    case Collective::AllReduce: {
      const Range slice = even_part(n, size_, rank_);
      const std::size_t from = static_cast<std::size_t>(at + slice.begin) * elem;
      for (std::size_t q = 0; q < sources.size(); ++q) sources[q] = peer_buffer(op, q) + from;
      fold_in_rank_order(dtype, out + from, sources, slice.size());
      return;
    }
    case Collective::ReduceScatter: {
      const std::size_t share = static_cast<std::size_t>(rank_) * count * elem;
      for (std::size_t q = 0; q < sources.size(); ++q) sources[q] = peer_buffer(op, q) + share;
      fold_in_rank_order(dtype, out, sources, n);
      return;
    }
    case Collective::AllGather: {
      // Pushed: this rank writes its input into its segment of every rank's output, so that its
      // own parameters are only ever read here (a peer's read would leave them in both cores'
      // caches, and the optimizer's writes next step would have to take them back first).
      const std::size_t segment = static_cast<std::size_t>(rank_) * count * elem;
      const std::size_t bytes = static_cast<std::size_t>(n) * elem;
      std::vector<char*>& destinations = destinations_;
      destinations.clear();
      for (std::size_t q = 0; q < sources.size(); ++q) {
        char* to = peer_buffer(op, q) + segment;
        if (to != op.call.in.bytes_begin()) destinations.push_back(to);  // in place: already there
      }
      if (bytes * destinations.size() >= kStreamedAllGatherBytes) {
        cpu::stream_copy_to_each(destinations, op.call.in.bytes_begin(), bytes);
      } else {
        for (char* to : destinations) std::memcpy(to, op.call.in.bytes_begin(), bytes);
      }
      return;
    }
    case Collective::Broadcast:
    case Collective::Barrier:
      break;
  }
  throw Error(detail::concat("shared-memory collectives: no ", to_string(op.call.kind)));
}

// This rank's folded slice of the chunk, into every peer's buffer.
void SharedSums::push_in_place(const Op& op, std::int64_t at, std::int64_t n) {
  const std::size_t elem = dtype_size(op.call.out.dtype);
  const Range mine = even_part(n, size_, rank_);
  const std::size_t from = static_cast<std::size_t>(at + mine.begin) * elem;
  const char* folded = static_cast<const char*>(op.call.out.data) + from;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    std::memcpy(peer_buffer(op, static_cast<std::size_t>(q)) + from, folded,
                static_cast<std::size_t>(mine.size()) * elem);
  }
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
