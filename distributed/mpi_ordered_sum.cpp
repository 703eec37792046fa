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

template <class T>
void fold_as(T* out, const std::vector<const char*>& sources, std::int64_t count) {
  // Tile by tile through an accumulator that stays in L1: one pass over the output instead of
  // one per rank, and an output that is also a source is read before it is written.
  constexpr std::int64_t kTile = 2048;
  T acc[kTile];
  for (std::int64_t at = 0; at < count; at += kTile) {
    const std::int64_t len = std::min(kTile, count - at);
    std::memcpy(acc, reinterpret_cast<const T*>(sources[0]) + at, len * sizeof(T));
    for (std::size_t q = 1; q < sources.size(); ++q) {
      const T* src = reinterpret_cast<const T*>(sources[q]) + at;
      for (std::int64_t i = 0; i < len; ++i) acc[i] += src[i];
    }
    std::memcpy(out + at, acc, len * sizeof(T));
  }
}

// The bf16 sums of process_group.hpp: the tile accumulates in fp32, rounded once as it is stored.
void fold_bf16(std::uint16_t* out, const std::vector<const char*>& sources, std::int64_t count) {
  constexpr std::int64_t kTile = 2048;
  float acc[kTile];
  for (std::int64_t at = 0; at < count; at += kTile) {
    const std::int64_t len = std::min(kTile, count - at);
    const auto* first = reinterpret_cast<const std::uint16_t*>(sources[0]) + at;
    for (std::int64_t i = 0; i < len; ++i) acc[i] = bf16_value(first[i]);
    for (std::size_t q = 1; q < sources.size(); ++q) {
      const auto* src = reinterpret_cast<const std::uint16_t*>(sources[q]) + at;
      for (std::int64_t i = 0; i < len; ++i) acc[i] += bf16_value(src[i]);
    }
    for (std::int64_t i = 0; i < len; ++i) out[at + i] = bf16_bits(acc[i]);
  }
}

}  // namespace

void fold_in_rank_order(DType dtype, void* out, const std::vector<const char*>& sources,
                        std::int64_t count) {
  switch (dtype) {
    case DType::F32: return fold_as(static_cast<float*>(out), sources, count);
    case DType::F64: return fold_as(static_cast<double*>(out), sources, count);
    case DType::I32: return fold_as(static_cast<std::int32_t*>(out), sources, count);
    case DType::I64: return fold_as(static_cast<std::int64_t*>(out), sources, count);
    case DType::BF16: return fold_bf16(static_cast<std::uint16_t*>(out), sources, count);
  }
  throw Error(detail::concat("MPI process group: no ", to_string(dtype), " sums"));
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
                    int first_tag, int second_tag, ScratchPool& pool, MpiProgress& progress)
      : peers_(peers),
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
    fold_in_rank_order(dtype_, folded, sources_, mine.size());
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

OrderedSums::OrderedSums(MPI_Comm comm, int rank, int size, MpiProgress& progress)
    : comm_(comm), rank_(rank), size_(size), progress_(progress) {
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
                                               progress_);
  }
  // One round: every rank's whole buffer, then the fold over all of them.
  std::shared_ptr<char> all = scratch_->acquire(bytes * ranks);
  std::vector<MPI_Request> requests(1);
  const int n = static_cast<int>(call.count);
  NOEIRA_MPI_CHECK(
      MPI_Iallgather(call.out.data, n, type, all.get(), n, type, comm_, requests.data()));
  auto fold = [all, out = call.out, bytes, ranks] {
    std::vector<const char*> sources(ranks);
    for (std::size_t q = 0; q < ranks; ++q) sources[q] = all.get() + q * bytes;
    fold_in_rank_order(out.dtype, out.data, sources, static_cast<std::int64_t>(out.count));
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
  auto fold = [slots, sources = std::move(sources), out = call.out] {
    fold_in_rank_order(out.dtype, out.data, sources, static_cast<std::int64_t>(out.count));
  };
  return std::make_unique<MpiWork>(std::move(requests), progress_, std::move(fold));
}

}  // namespace noeira::dist
