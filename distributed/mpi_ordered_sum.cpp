#include "distributed/mpi_ordered_sum.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "distributed/mpi_check.hpp"
#include "distributed/shard.hpp"
#include "kernels/bf16_math.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

// --- ScratchPool -------------------------------------------------------------------------------

ScratchPool::~ScratchPool() {
  for (Block& b : free_) delete[] reinterpret_cast<std::max_align_t*>(b.memory);
}

std::shared_ptr<char> ScratchPool::acquire(std::size_t bytes) {
  // The smallest free block that is large enough; else the largest free one is replaced by one
  // of `bytes`, so the pool holds one block per op in flight, each as large as it has needed.
  auto fits = free_.end(), largest = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->bytes >= bytes && (fits == free_.end() || it->bytes < fits->bytes)) fits = it;
    if (largest == free_.end() || it->bytes > largest->bytes) largest = it;
  }
  Block block{};
  if (fits != free_.end()) {
    block = *fits;
    free_.erase(fits);
  } else {
    if (largest != free_.end()) {
      delete[] reinterpret_cast<std::max_align_t*>(largest->memory);
      free_.erase(largest);
    }
    const std::size_t words = (std::max<std::size_t>(bytes, 1) + sizeof(std::max_align_t) - 1) /
                              sizeof(std::max_align_t);
    block = {reinterpret_cast<char*>(new std::max_align_t[words]),
             words * sizeof(std::max_align_t)};
  }
  return std::shared_ptr<char>(block.memory,
                               [pool = shared_from_this(), block](char*) {
                                 pool->free_.push_back(block);
                               });
}

// --- The fold ----------------------------------------------------------------------------------

namespace {

// Tile by tile through accumulators that stay in L1: one pass over the output instead of one per
// rank, and an output that is also a source is read before it is written. `value` reads element
// j of a source as the accumulator's type; `store` writes a finished tile. One node's ranks add
// straight into `acc`; each later node's add into `part`, which then joins `acc`.
template <class Acc, class Value, class Store>
void fold_tiles(const std::vector<const char*>& sources, const NodeLayout* layout,
                std::int64_t count, Value value, Store store) {
  constexpr std::int64_t kTile = 2048;
  Acc acc[kTile];
  Acc part[kTile];
  const std::size_t nodes = layout != nullptr ? static_cast<std::size_t>(layout->nodes()) : 1;
  for (std::int64_t at = 0; at < count; at += kTile) {
    const std::int64_t len = std::min(kTile, count - at);
    for (std::size_t k = 0; k < nodes; ++k) {
      Acc* into = k == 0 ? acc : part;
      const std::size_t members =
          layout != nullptr ? layout->members()[k].size() : sources.size();
      for (std::size_t m = 0; m < members; ++m) {
        const char* src =
            sources[layout != nullptr ? static_cast<std::size_t>(layout->members()[k][m]) : m];
        if (m == 0) {
          for (std::int64_t i = 0; i < len; ++i) into[i] = value(src, at + i);
        } else {
          for (std::int64_t i = 0; i < len; ++i) into[i] += value(src, at + i);
        }
      }
      if (k > 0) {
        for (std::int64_t i = 0; i < len; ++i) acc[i] += part[i];
      }
    }
    store(acc, at, len);
  }
}

template <class T>
void fold_as(T* out, const std::vector<const char*>& sources, std::int64_t count,
             const NodeLayout* layout) {
  fold_tiles<T>(
      sources, layout, count,
      [](const char* src, std::int64_t j) { return reinterpret_cast<const T*>(src)[j]; },
      [out](const T* acc, std::int64_t at, std::int64_t len) {
        std::memcpy(out + at, acc, static_cast<std::size_t>(len) * sizeof(T));
      });
}

// The bf16 sums of process_group.hpp: accumulated in fp32, rounded once as a tile is stored.
void fold_bf16(std::uint16_t* out, const std::vector<const char*>& sources, std::int64_t count,
               const NodeLayout* layout) {
  fold_tiles<float>(
      sources, layout, count,
      [](const char* src, std::int64_t j) {
        return bf16_value(reinterpret_cast<const std::uint16_t*>(src)[j]);
      },
      [out](const float* acc, std::int64_t at, std::int64_t len) {
        for (std::int64_t i = 0; i < len; ++i) out[at + i] = bf16_bits(acc[i]);
      });
}

}  // namespace

void fold_in_node_order(DType dtype, void* out, const std::vector<const char*>& sources,
                        std::int64_t count, const NodeLayout* layout) {
  NOEIRA_CHECK(layout == nullptr || static_cast<std::size_t>(layout->ranks()) == sources.size(),
               "fold: ", sources.size(), " sources for a layout of ", layout->ranks(), " ranks");
  switch (dtype) {
    case DType::F32: return fold_as(static_cast<float*>(out), sources, count, layout);
    case DType::F64: return fold_as(static_cast<double*>(out), sources, count, layout);
    case DType::I32: return fold_as(static_cast<std::int32_t*>(out), sources, count, layout);
    case DType::I64: return fold_as(static_cast<std::int64_t*>(out), sources, count, layout);
    case DType::BF16:
      return fold_bf16(static_cast<std::uint16_t*>(out), sources, count, layout);
  }
  throw Error(detail::concat("MPI process group: no ", to_string(dtype), " sums"));
}

void fold_in_rank_order(DType dtype, void* out, const std::vector<const char*>& sources,
                        std::int64_t count) {
  fold_in_node_order(dtype, out, sources, count, nullptr);
}

// --- The exchanges -----------------------------------------------------------------------------

namespace {

struct Peers {
  MPI_Comm comm;
  int rank;
  int size;
};

// Posts this rank's side of an all-to-all over `total` elements of `send` cut by even_part: part
// q goes to peer q, and every peer's part `rank` comes into `slots` (peer order, this rank left
// out). Returns, per rank q, where q's part `rank` is on this rank: the fold's sources.
std::vector<const char*> post_exchange(const Peers& p, const char* send, std::int64_t total,
                                       DType dtype, MPI_Datatype type, int tag, char* slots,
                                       std::vector<MPI_Request>& requests) {
  const std::size_t elem = dtype_size(dtype);
  const Range mine = even_part(total, p.size, p.rank);
  const std::size_t mine_bytes = static_cast<std::size_t>(mine.size()) * elem;
  std::vector<const char*> sources(static_cast<std::size_t>(p.size));
  sources[static_cast<std::size_t>(p.rank)] = send + static_cast<std::size_t>(mine.begin) * elem;
  // Receives first, so messages find them posted; peers in the order rank+1, rank+2, ... so that
  // the ranks do not all send to rank 0 first.
  for (int i = 1; i < p.size; ++i) {
    const int q = (p.rank + p.size - i) % p.size;
    char* slot = slots + static_cast<std::size_t>(q - (q > p.rank ? 1 : 0)) * mine_bytes;
    sources[static_cast<std::size_t>(q)] = slot;
    if (mine.empty()) continue;
    NOEIRA_MPI_CHECK(MPI_Irecv(slot, static_cast<int>(mine.size()), type, q, tag, p.comm,
                               &requests.emplace_back()));
  }
  for (int i = 1; i < p.size; ++i) {
    const int q = (p.rank + i) % p.size;
    const Range theirs = even_part(total, p.size, q);
    if (theirs.empty()) continue;
    NOEIRA_MPI_CHECK(MPI_Isend(send + static_cast<std::size_t>(theirs.begin) * elem,
                               static_cast<int>(theirs.size()), type, q, tag, p.comm,
                               &requests.emplace_back()));
  }
  return sources;
}

// A large allreduce: phase 1 exchanges the chunks and folds chunk `rank` in place; phase 2 sends
// it to every peer and receives theirs. Phase 2 is posted by advance(), from any test or wait of
// the group (MpiProgress), as soon as phase 1 has completed here.
class TwoPhaseAllreduce final : public WorkImpl, public PhasedOp {
 public:
  TwoPhaseAllreduce(const Peers& peers, const CollectiveCall& call, MPI_Datatype type,
                    int first_tag, int second_tag, ScratchPool& pool, MpiProgress& progress,
                    const NodeLayout* layout)
      : peers_(peers),
        layout_(layout),
        buf_(static_cast<char*>(call.out.data)),
        count_(call.count),
        dtype_(call.out.dtype),
        type_(type),
        second_tag_(second_tag),
        progress_(progress) {
    const Range mine = even_part(count_, peers.size, peers.rank);
    scratch_ = pool.acquire(static_cast<std::size_t>(mine.size() * (peers.size - 1)) *
                            dtype_size(dtype_));
    sources_ = post_exchange(peers, buf_, count_, dtype_, type, first_tag, scratch_.get(), first_);
    progress_.add(this);  // last: nothing below may throw with `this` registered
  }
  ~TwoPhaseAllreduce() override { progress_.remove(this); }

  bool advance() override {
    if (second_posted_) return true;
    int flag = 0;
    NOEIRA_MPI_CHECK(MPI_Testall(static_cast<int>(first_.size()), first_.data(), &flag,
                                 MPI_STATUSES_IGNORE));
    if (!flag) return false;
    const std::size_t elem = dtype_size(dtype_);
    const Range mine = even_part(count_, peers_.size, peers_.rank);
    char* folded = buf_ + static_cast<std::size_t>(mine.begin) * elem;
    fold_in_node_order(dtype_, folded, sources_, mine.size(), layout_);
    scratch_.reset();  // back to the pool: phase 2 moves the buffer's own bytes
    for (int i = 1; i < peers_.size; ++i) {
      const int q = (peers_.rank + peers_.size - i) % peers_.size;
      const Range theirs = even_part(count_, peers_.size, q);
      if (theirs.empty()) continue;
      NOEIRA_MPI_CHECK(MPI_Irecv(buf_ + static_cast<std::size_t>(theirs.begin) * elem,
                                 static_cast<int>(theirs.size()), type_, q, second_tag_,
                                 peers_.comm, &second_.emplace_back()));
    }
    for (int i = 1; i < peers_.size && !mine.empty(); ++i) {
      NOEIRA_MPI_CHECK(MPI_Isend(folded, static_cast<int>(mine.size()), type_,
                                 (peers_.rank + i) % peers_.size, second_tag_, peers_.comm,
                                 &second_.emplace_back()));
    }
    second_posted_ = true;
    return true;
  }

  bool test() override {
    progress_.advance();  // this op among them, while its phase 1 runs
    return second_posted_ && test_all(second_, progress_);
  }

  void wait() override {
    while (!second_posted_) progress_.advance();
    wait_all(second_, progress_);
  }

 private:
  Peers peers_;
  const NodeLayout* layout_;  // the fold's order (null: one node)
  char* buf_;
  std::int64_t count_;
  DType dtype_;
  MPI_Datatype type_;
  int second_tag_;
  MpiProgress& progress_;
  std::shared_ptr<char> scratch_;      // the peers' chunks `rank`, until the fold
  std::vector<const char*> sources_;   // [ranks] the fold's inputs
  std::vector<MPI_Request> first_, second_;
  bool second_posted_ = false;
};

}  // namespace

// --- OrderedSums -------------------------------------------------------------------------------

OrderedSums::OrderedSums(MPI_Comm comm, int rank, int size, MpiProgress& progress,
                         NodeLayout layout)
    : comm_(comm),
      rank_(rank),
      size_(size),
      progress_(progress),
      layout_(std::move(layout)),
      fold_layout_(layout_.nodes() > 1 ? &layout_ : nullptr) {
  NOEIRA_CHECK(layout_.ranks() == size, "ordered sums: a layout of ", layout_.ranks(),
               " ranks for ", size);
  int* tag_ub = nullptr;
  int flag = 0;
  NOEIRA_MPI_CHECK(MPI_Comm_get_attr(comm, MPI_TAG_UB, &tag_ub, &flag));
  tag_span_ = flag ? *tag_ub / 2 : 32767 / 2;
}

int OrderedSums::tag(std::uint64_t seq, int phase) const {
  return static_cast<int>(seq % static_cast<std::uint64_t>(tag_span_)) * 2 + phase;
}

std::unique_ptr<WorkImpl> OrderedSums::allreduce(const CollectiveCall& call, MPI_Datatype type) {
  const std::size_t bytes = call.out.bytes();
  const auto ranks = static_cast<std::size_t>(size_);
  if (bytes * ranks > kGatherAllBytes && call.count >= size_) {
    return std::make_unique<TwoPhaseAllreduce>(Peers{comm_, rank_, size_}, call, type,
                                               tag(call.seq, 0), tag(call.seq, 1), *scratch_,
                                               progress_, fold_layout_);
  }
  // One round: every rank's whole buffer, then the fold over all of them.
  std::shared_ptr<char> all = scratch_->acquire(bytes * ranks);
  std::vector<MPI_Request> requests(1);
  const int n = static_cast<int>(call.count);
  NOEIRA_MPI_CHECK(
      MPI_Iallgather(call.out.data, n, type, all.get(), n, type, comm_, requests.data()));
  auto fold = [all, out = call.out, bytes, ranks, layout = fold_layout_] {
    std::vector<const char*> sources(ranks);
    for (std::size_t q = 0; q < ranks; ++q) sources[q] = all.get() + q * bytes;
    fold_in_node_order(out.dtype, out.data, sources, static_cast<std::int64_t>(out.count),
                       layout);
  };
  return std::make_unique<MpiWork>(std::move(requests), progress_, std::move(fold));
}

std::unique_ptr<WorkImpl> OrderedSums::reduce_scatter(const CollectiveCall& call,
                                                      MPI_Datatype type) {
  // The shard is the input's part `rank` under even_part: in.count is out.count · size.
  const std::size_t shard_bytes = call.out.bytes();
  std::shared_ptr<char> slots =
      scratch_->acquire(shard_bytes * static_cast<std::size_t>(size_ - 1));
  std::vector<MPI_Request> requests;
  std::vector<const char*> sources =
      post_exchange(Peers{comm_, rank_, size_}, call.in.bytes_begin(),
                    static_cast<std::int64_t>(call.in.count), call.out.dtype, type,
                    tag(call.seq, 0), slots.get(), requests);
  auto fold = [slots, sources = std::move(sources), out = call.out, layout = fold_layout_] {
    fold_in_node_order(out.dtype, out.data, sources, static_cast<std::int64_t>(out.count),
                       layout);
  };
  return std::make_unique<MpiWork>(std::move(requests), progress_, std::move(fold));
}

}  // namespace noeira::dist
