#pragma once
// Which node each rank of a group runs on, and the order of additions that follows from it.
//
// A sum over ranks is defined node by node: each node's ranks are added in rank order (a left
// fold), and the nodes' sums are added in node order, nodes ordered by their lowest rank:
//   ((P_0 + P_1) + P_2) + ...   where P_k = ((x_a + x_b) + x_c) + ... over node k's ranks a < b < c
// On one node that is the left fold in rank order over all ranks. Every backend whose bits must
// equal the simulated backend's (the MPI one, and the simulated one itself) adds in this order, so
// a job on several nodes can reduce inside each node first and send one partial sum per node
// across the network (distributed/mpi_node_sums.hpp), and `--sim-ranks N --sim-ranks-per-node M`
// replays `mpirun -np N` on nodes of M ranks bit for bit.
#include <string>
#include <vector>

namespace noeira::dist {

class NodeLayout {
 public:
  // node_of[r]: any label of rank r's node (equal labels, same node); renumbered by lowest rank.
  explicit NodeLayout(const std::vector<int>& node_of);
  static NodeLayout one_node(int ranks);
  // Rank r on node r / ranks_per_node (the last node holds the remainder).
  static NodeLayout blocks(int ranks, int ranks_per_node);

  int ranks() const { return static_cast<int>(node_of_.size()); }
  int nodes() const { return static_cast<int>(members_.size()); }
  int node_of(int rank) const { return node_of_[static_cast<std::size_t>(rank)]; }
  // [nodes] each node's ranks in rank order, nodes in node order: the order of additions.
  const std::vector<std::vector<int>>& members() const { return members_; }
  // M when every node holds M consecutive ranks (rank r on node r / M), else 0.
  int block_size() const;
  // "1 node", "2 nodes of 2 ranks", "2 nodes of 3 and 1 ranks".
  std::string describe() const;
  // describe() where there are several nodes, empty on one (ProcessGroup::nodes()).
  std::string several_nodes() const { return nodes() > 1 ? describe() : std::string(); }

  bool operator==(const NodeLayout& other) const { return node_of_ == other.node_of_; }

 private:
  std::vector<int> node_of_;
  std::vector<std::vector<int>> members_;
};

}  // namespace noeira::dist
