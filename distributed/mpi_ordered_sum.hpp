#pragma once
// The MPI backend's sums in the simulated backend's order: element e of every result is
//   ((in_0[e] + in_1[e]) + in_2[e]) + ... + in_{N-1}[e]
// in the buffer's type, a left fold in rank order (distributed/sim_process_group.cpp), so that
// `mpirun -np N noeira train` and `noeira train --sim-ranks N` give the same bits at every N. On
// several nodes, each node's ranks so, then the nodes (node_layout.hpp): the fold takes the
// layout.
// Open MPI's own reductions (libnbc's trees, rings and recursive halving) add in orders of their
// own that differ from rank order from N = 4 on, and floating-point addition does not associate.
//
// How (ranks exchange raw inputs and every rank folds locally, in rank order):
//  - reduce-scatter: an all-to-all of chunks by point-to-point messages (rank r receives every
//    peer's chunk r), then the fold into r's output: the (N-1)/N of the input per rank that a
//    ring moves;
//  - allreduce of a large buffer: the same exchange over N chunks as even as the count allows
//    (shard.hpp's even_part), the fold of chunk r in place, then an all-gather of the folded
//    chunks: 2(N-1)/N of the buffer per rank, as a ring; two phases (mpi_work.hpp says why the
//    group must keep posting the second);
//  - allreduce of a small buffer (a loss sum, a norm, a few KiB): one MPI_Iallgather of every
//    rank's whole buffer, then the fold: N times the bytes, but one message round instead of two,
//    which is what a few bytes cost.
// The messages of op #s carry tags made from s, so that ops in flight at once (DDP's buckets,
// waited in any order) never match each other's messages. Received chunks land in scratch memory
// the group keeps and reuses (ScratchPool), grown to the largest op in flight, never freed per op.
#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "distributed/mpi_work.hpp"
#include "distributed/node_layout.hpp"
#include "distributed/process_group.hpp"

namespace noeira::dist {

// Host memory for ops in flight, kept between ops: each op takes a block of its own (several are
// in flight at once) and gives it back when the last copy of the pointer goes.
class ScratchPool : public std::enable_shared_from_this<ScratchPool> {
 public:
  ScratchPool() = default;
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;
  ~ScratchPool();

  // At least `bytes`, aligned for any element type. The pool must be owned by a shared_ptr.
  std::shared_ptr<char> acquire(std::size_t bytes);

 private:
  struct Block {
    char* memory;
    std::size_t bytes;
  };
  std::vector<Block> free_;
};

// out[e] = ((sources[0][e] + sources[1][e]) + ...) for e < count, in `dtype` (bf16: in fp32,
// rounded once, process_group.hpp). out may be one of the sources (the fold reads every source of
// a tile before it writes the tile).
void fold_in_rank_order(DType dtype, void* out, const std::vector<const char*>& sources,
                        std::int64_t count);
// The same in the order of `layout` (node_layout.hpp: each node's ranks, then the nodes), sources
// in rank order; a null layout is one node.
void fold_in_node_order(DType dtype, void* out, const std::vector<const char*>& sources,
                        std::int64_t count, const NodeLayout* layout);

class OrderedSums {
 public:
  // The sums add in the order of `layout` (the ranks of comm on their nodes).
  OrderedSums(MPI_Comm comm, int rank, int size, MpiProgress& progress, NodeLayout layout);

  // call.out = Σ over ranks of call.out (the funnel's allreduce: in place).
  std::unique_ptr<WorkImpl> allreduce(const CollectiveCall& call, MPI_Datatype type);
  // call.out = this rank's segment of Σ over ranks of call.in; in place when out is that segment.
  std::unique_ptr<WorkImpl> reduce_scatter(const CollectiveCall& call, MPI_Datatype type);

  // Allreduces whose ranks receive at most this many bytes in all take the one-round path.
  static constexpr std::size_t kGatherAllBytes = 64 * 1024;

 private:
  int tag(std::uint64_t seq, int phase) const;

  MPI_Comm comm_;
  int rank_;
  int size_;
  int tag_span_;  // tags 0 .. 2·tag_span_-1 are ours (MPI guarantees at least 32767)
  MpiProgress& progress_;
  NodeLayout layout_;
  const NodeLayout* fold_layout_;  // null on one node: the plain rank-order fold
  std::shared_ptr<ScratchPool> scratch_ = std::make_shared<ScratchPool>();
};

}  // namespace noeira::dist
