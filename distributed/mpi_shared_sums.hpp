#pragma once
// Allreduce, reduce-scatter and all-gather through MPI-3 shared memory, for a communicator whose
// ranks all live on one node (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) gives the whole of it).
// Every rank has a region of a window made by MPI_Win_allocate_shared, which its peers map too.
// An op moves its buffer through the regions chunk by chunk:
//  - each rank copies into its region the parts of its chunk that its peers fold, and raises its
//    `arrived` counter;
//  - once every peer's is up, each rank folds its own slice of the chunk from every region, in
//    rank order (mpi_ordered_sum.hpp's fold_in_rank_order: the simulated backend's bits), and for
//    an allreduce writes the result over that slice of its own region, raises `reduced` and, once
//    every peer has, copies every peer's folded slice out;
//  - it raises `released`: a region is written again only when every peer has released it.
// The data crosses memory three times (in, fold, out; a rank folds its own slice from its buffer)
// instead of passing through Open MPI's fragments, with no message matching or progress engine:
// what makes the per-call cost small. The regions are small (the chunks stay in cache).
//
// The ops are non-blocking, as the other MPI ops are: start() queues the op; each test() and wait()
// of the group's Works (MpiProgress, which every MPI wait of the group polls while an op here is
// pending) moves the queue on without blocking, oldest op first, chunk by chunk, as far as the
// peers allow. Nothing moves at start(), so a rank that starts an op and then stops (SIGSTOP, a
// wedged process) has not done its part, and its peers' watchdog sees it stopped. So no rank that waits for another op, here or over MPI, keeps a peer from
// finishing one of these, and a rank's MPI ops keep moving while it waits here. A peer that never
// arrives leaves its partners polling until the watchdog (distributed/watchdog.hpp) fails the job
// and names the rank. The poll yields the core between looks, for oversubscribed ranks.
//
// In place: a buffer from allocate() (the group's shared_memory) is memory every peer maps. An
// allreduce or a reduce-scatter whose input lies in such a buffer on every rank, or
// an all-gather whose output does, moves without the regions: each rank folds its slice
// (allreduce) or segment (reduce-scatter) straight from the peers' inputs, and writes what goes
// to the peers straight into their buffers: an allreduce its folded slice, an all-gather its
// input (pushed both: measured against the peers pulling them, the allreduce took 41 against
// 61 µs at 1 MiB on 2 ranks, and a rank's parameters stay in its own cache for the optimizer's
// next writes). The data crosses memory twice instead of three times (once for a reduce-scatter
// or an all-gather), in the same rank order, and no rank waits for another between the fold and
// the push. The op completes only once every peer has raised `released`, since until then a
// peer may still read or write this rank's buffer. The ranks
// publish each op (sequence, kind, type, count, block and where in it their input lies) before
// they read anything, so that a rank whose input is not in the block where its peers' are fails
// with a message naming it instead of reading a wrong place.
//
// An in-place all-gather that writes kStreamedAllGatherBytes or more (its input times the
// destinations it goes to, its own segment included) streams them past the cache
// (kernels/cpu/stream_copy.hpp): memcpy would read every destination line first and its input
// once per destination. Measured at 64 MiB on 2 ranks: 5.5 ms memcpy'd, 4.0 ms streamed (raw MPI
// 7.5) on a 32 MiB-L3 AMD EPYC guest, 8.1–8.4 against 6.8–7.0 ms on a Xeon guest; smaller ones
// keep memcpy (the output stays in cache for whoever reads it next): at 4 MiB streaming took 194
// µs against 76 on the EPYC, and at 16 MiB 2.9 ms against 1.25 on the Xeon (4 ranks on its 2
// cores: 9.1–9.4 against 5.0–6.4), where the 16 MiB threshold had made it slower than raw MPI.
//
// NOEIRA_SHARED_MEMORY=0 in the environment turns it off (the ops go over MPI messages as before);
// NOEIRA_SHARED_MEMORY_MB sets the region size per rank (default 0.5 MiB; other chunks, same bits).
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "distributed/mpi_work.hpp"
#include "distributed/process_group.hpp"

namespace noeira::dist {

// Free bytes of the file system that holds shared windows' backing files (Open MPI's
// osc_sm_backing_directory: /dev/shm unless OMPI_MCA_osc_sm_backing_directory says otherwise);
// 0 when it cannot be read.
std::uint64_t shared_window_free_bytes();

// Bytes an in-place all-gather writes from which it streams them (above).
inline constexpr std::size_t kStreamedAllGatherBytes = std::size_t{64} << 20;

class SharedSums final : public PhasedOp {
 public:
  // Null when the ranks of `comm` are not all on one node or shared memory is turned off.
  // Collective over comm. `progress` is the group's: pending ops here are advanced through it.
  static std::unique_ptr<SharedSums> create(MPI_Comm comm, int rank, int size,
                                            MpiProgress& progress);
  ~SharedSums() override;
  SharedSums(const SharedSums&) = delete;
  SharedSums& operator=(const SharedSums&) = delete;

  // `bytes` of memory that every peer maps, zeroed, alive while `owner` is: a window of its own.
  // Collective: every rank calls it at the same point (the sizes may differ). The window is
  // freed, collectively, when the last owner goes.
  struct SharedBuffer {
    void* data = nullptr;
    std::shared_ptr<void> owner;
  };
  SharedBuffer allocate(std::size_t bytes);

  // An allreduce, reduce-scatter or all-gather of process_group.hpp (same in-place rules).
  std::unique_ptr<WorkImpl> start(const CollectiveCall& call);

  // PhasedOp: moves the queue on without blocking; true once it is empty.
  bool advance() override;

  std::size_t region_bytes() const { return region_bytes_; }

  // What an op is, as each rank publishes it for its peers to check.
  struct OpHeader {
    std::uint64_t seq, kind, dtype, count, block, offset;
  };
  struct Counters;
  struct Block;
  struct Op;

 private:
  SharedSums(MPI_Win win, MPI_Comm comm, int rank, int size, std::size_t region_bytes,
             std::vector<char*> regions, std::vector<Counters*> counters, MpiProgress& progress);

  // Whether every rank's counter `which` has reached `value`.
  bool all_reached(std::uint64_t Counters::*which, std::uint64_t value) const;
  void raise(std::uint64_t Counters::*which, std::uint64_t value);
  // Moves the queue on, oldest op first, as far as the peers allow.
  void move_queue();
  // Moves `op` on as far as the peers allow; true when it is complete.
  bool step(Op& op);
  void copy_in(const Op& op, std::int64_t n);
  void fold(const Op& op, std::int64_t n);
  void copy_out(const Op& op, std::int64_t n);
  std::int64_t chunk_of(const Op& op) const;
  void publish_header(const Op& op);
  // Throws unless every rank runs the op this one does, its input where it may be read; keeps
  // where the peers' inputs lie.
  void check_headers(Op& op) const;
  // The same for an op whose inputs lie in a block (see above).
  bool step_in_place(Op& op);
  std::int64_t chunk_in_place(const Op& op) const;
  char* peer_buffer(const Op& op, std::size_t rank) const;
  void fold_in_place(const Op& op, std::int64_t at, std::int64_t n);
  void push_in_place(const Op& op, std::int64_t at, std::int64_t n);

  MPI_Win win_;
  MPI_Comm comm_;
  int rank_;
  int size_;
  std::size_t region_bytes_;
  std::vector<char*> regions_;        // [ranks] each rank's region, mapped here
  std::vector<Counters*> counters_;   // [ranks] each rank's counters, mapped here
  MpiProgress& progress_;
  std::deque<std::shared_ptr<Op>> queue_;  // started, not complete; oldest first
  bool registered_ = false;                // in progress_ (until its advance() says true)
  std::uint64_t epoch_ = 0;                // chunks this rank has begun; the same on every rank
  std::vector<const char*> sources_;       // [ranks] a fold's inputs, kept from chunk to chunk
  std::vector<char*> destinations_;        // [ranks] an all-gather's outputs but this rank's own
  std::uint64_t allocations_ = 0;          // blocks allocated so far
  std::vector<std::weak_ptr<Block>> blocks_;  // those still owned
};

}  // namespace noeira::dist
