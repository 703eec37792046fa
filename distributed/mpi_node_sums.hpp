#pragma once
// Allreduce, reduce-scatter and all-gather of a job on several nodes, each holding M >= 2
// consecutive ranks (rank r on node r / M, the block placement of mpirun and Slurm): inside a
// node through its shared memory (SharedSums on the node's ranks), between nodes by MPI messages
// among the ranks at the same place l of their nodes (a "column": one rank per node, in node
// order). A rank sends across the network the node's partial sum of its 1/M share, once: 1/M of
// what the flat exchange of the whole group (mpi_ordered_sum.hpp) sends between nodes.
//
// The sums are node_layout.hpp's, so the bits are those of the flat exchange and of
// `--sim-ranks N --sim-ranks-per-node M`: SharedSums folds a node's ranks in rank order, the
// column's OrderedSums folds the nodes' partial sums in node order.
//  - reduce-scatter (n elements per rank): for each node k, a reduce-scatter inside the node of
//    node k's M segments gives place l the node's partial of segment k·M + l; the column
//    reduce-scatters those K partials, and the rank on node k gets the sum of its own segment;
//  - allreduce: a reduce-scatter inside the node (place l gets part l of the node's partial), an
//    allreduce of that part in the column, an all-gather inside the node; the count's remainder
//    past M equal parts goes by an allreduce inside the node and one in the column;
//  - all-gather: an all-gather in the column (node k's input at place l, for every k), then, for
//    each node k, an all-gather inside the node into the output's block of node k.
// An op's phases run one after the other, and the ops one at a time in the order they started (a
// queue moved on by MpiProgress, as SharedSums's is): every rank starts the parts in the same
// order, which SharedSums's epochs and MPI's matching of collectives need. As in SharedSums,
// nothing is exchanged at start(). Buffers from the group's shared memory are the node's: the
// parts inside a node work on them in place.
// A bf16 sum is one fp32 sum of the bf16 inputs, rounded once: the op widens its input to fp32
// when it starts (a local copy), sums that (so the nodes' partial sums are not rounded) and
// rounds the result into the output when it is done. Across the network its partial sums then
// travel as fp32: 4 bytes for each of 1/M of the elements, against the flat exchange's 2 bytes
// for (N−M)/N of them.
#include <mpi.h>

#include <cstdint>
#include <deque>
#include <memory>

#include "distributed/mpi_ordered_sum.hpp"
#include "distributed/mpi_shared_sums.hpp"
#include "distributed/mpi_work.hpp"
#include "distributed/node_layout.hpp"
#include "distributed/process_group.hpp"

namespace noeira::dist {

// The node of every rank of comm: MPI's shared-memory split, or, when NOEIRA_RANKS_PER_NODE=M is
// set, blocks of M consecutive ranks (nodes pretended on one machine, for tests and benchmarks of
// a job that spans nodes). Collective over comm.
NodeLayout mpi_node_layout(MPI_Comm comm, int rank);

class NodeSums final : public PhasedOp {
 public:
  // Null unless `layout` has several nodes of M >= 2 consecutive ranks and every node has shared
  // memory (SharedSums::create). Collective over comm.
  static std::unique_ptr<NodeSums> create(MPI_Comm comm, int rank, const NodeLayout& layout,
                                          MpiProgress& progress);
  ~NodeSums() override;
  NodeSums(const NodeSums&) = delete;
  NodeSums& operator=(const NodeSums&) = delete;

  // Whether start() takes the call: allreduce, reduce-scatter, all-gather.
  static bool takes(const CollectiveCall& call);
  // `type` is the MPI datatype of call's elements.
  std::unique_ptr<WorkImpl> start(const CollectiveCall& call, MPI_Datatype type);

  // The node's shared memory (ProcessGroup::shared_memory).
  SharedSums& node() { return *node_; }

  // PhasedOp: moves the queue on without blocking; true once it is empty.
  bool advance() override;

  struct Op;

 private:
  NodeSums(MPI_Comm node_comm, MPI_Comm column_comm, std::unique_ptr<SharedSums> node,
           const NodeLayout& layout, int rank, MpiProgress& progress);
  // Starts the op's next phase; false when it has none left.
  bool start_phase(Op& op);
  void allreduce_phase(Op& op, int phase);
  void reduce_scatter_phase(Op& op, int phase);
  void all_gather_phase(Op& op, int phase);
  // The op's staging (taken from the pool at the first call): K blocks of its count, [nodes][n].
  Buffer staging_of(Op& op);
  // A bf16 sum's fp32 copy of its input (op.work), and its result rounded into the output.
  void widen(Op& op);
  void round_out(Op& op);
  // A part inside the node, or in the column (its tags from the op's sequence and `which`).
  void in_node(Op& op, Collective kind, ConstBuffer in, Buffer out, std::int64_t count);
  void in_column(Op& op, Collective kind, ConstBuffer in, Buffer out, int which);

  MPI_Comm node_comm_;
  MPI_Comm column_comm_;
  std::unique_ptr<SharedSums> node_;  // on node_comm_: this node's ranks
  int place_;                         // this rank's place on its node
  int node_size_;                     // M
  int nodes_;                         // K
  MpiProgress& progress_;
  OrderedSums column_;  // on column_comm_: one rank per node, in node order
  std::shared_ptr<ScratchPool> scratch_ = std::make_shared<ScratchPool>();
  std::deque<std::shared_ptr<Op>> queue_;  // started, not complete; oldest first
  bool registered_ = false;                // in progress_ (until advance() says true)
};

}  // namespace noeira::dist
