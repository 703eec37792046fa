// The nodes of a group and the order of additions that follows (distributed/node_layout.hpp):
// the layout's arithmetic, and the simulated backend's sums by nodes (--sim-ranks-per-node), bit
// for bit those of dist_checks.hpp's node_order_sum, which the MPI driver checks mpiexec against
// across pretended nodes (tests/dist.cmake).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dist_checks.hpp"
#include "distributed/node_layout.hpp"
#include "distributed/sim_process_group.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {
namespace {

TEST(NodeLayout, NodesAreNumberedByTheirLowestRank) {
  const NodeLayout layout({7, 3, 7, 3, 9});
  EXPECT_EQ(layout.nodes(), 3);
  EXPECT_EQ(layout.members(), (std::vector<std::vector<int>>{{0, 2}, {1, 3}, {4}}));
  EXPECT_EQ(layout.node_of(3), 1);
  EXPECT_EQ(layout.block_size(), 0) << "not consecutive ranks";
  EXPECT_EQ(layout.describe(), "3 nodes of 2, 2 and 1 ranks");
  // Nodes of equal size, but dealt round-robin (mpirun --map-by node): not blocks either.
  EXPECT_EQ(NodeLayout({0, 1, 0, 1}).block_size(), 0) << "ranks dealt round-robin";
}

TEST(NodeLayout, BlocksOfConsecutiveRanks) {
  const NodeLayout even = NodeLayout::blocks(6, 3);
  EXPECT_EQ(even.nodes(), 2);
  EXPECT_EQ(even.block_size(), 3);
  EXPECT_EQ(even.describe(), "2 nodes of 3 ranks");
  EXPECT_EQ(even, NodeLayout({0, 0, 0, 5, 5, 5}));
  const NodeLayout uneven = NodeLayout::blocks(5, 2);
  EXPECT_EQ(uneven.block_size(), 0) << "the last node holds one rank";
  EXPECT_EQ(uneven.describe(), "3 nodes of 2, 2 and 1 ranks");
  EXPECT_EQ(NodeLayout::one_node(4).describe(), "1 node");
  EXPECT_EQ(NodeLayout::one_node(4).block_size(), 4);
  EXPECT_EQ(NodeLayout::blocks(4, 4), NodeLayout::one_node(4));
}

struct Nodes {
  int ranks;
  int per_node;
};

class SimNodes : public ::testing::TestWithParam<Nodes> {};

// Every sum of every element type in the nodes' order, and, where the nodes are not one, not in
// the plain rank order: the check tells the two orders apart.
TEST_P(SimNodes, SumByNodesThenAcrossThem) {
  const auto [ranks, per_node] = GetParam();
  std::vector<std::int64_t> in_node_order(static_cast<std::size_t>(ranks), -1);
  std::vector<std::int64_t> in_rank_order(static_cast<std::size_t>(ranks), -1);
  std::vector<std::int64_t> exact(static_cast<std::size_t>(ranks), -1);
  run_simulated(
      ranks,
      [&](ProcessGroup& pg) {
        const auto r = static_cast<std::size_t>(pg.rank());
        EXPECT_EQ(pg.nodes(), per_node < ranks ? NodeLayout::blocks(ranks, per_node).describe()
                                               : std::string());
        std::int64_t wrong = 0;
        for (std::int64_t n : {1, 7, 1003}) {
          wrong += checks::check_rank_order<float>(pg, n, checks::Memory::Private, per_node);
          wrong += checks::check_rank_order<double>(pg, n, checks::Memory::Private, per_node);
          wrong += checks::check_rank_order<std::int64_t>(pg, n, checks::Memory::Private,
                                                          per_node);
          wrong += checks::check_rank_order_bf16(pg, n, checks::Memory::Private, per_node);
        }
        in_node_order[r] = wrong + checks::check_any_wait_order(pg, checks::Memory::Private,
                                                                per_node);
        in_rank_order[r] = checks::check_rank_order<float>(pg, 1003);
        exact[r] = checks::check_all(pg);
      },
      {}, Target::Cpu, per_node);
  for (int r = 0; r < ranks; ++r) {
    const auto i = static_cast<std::size_t>(r);
    EXPECT_EQ(in_node_order[i], 0) << "rank " << r;
    EXPECT_EQ(exact[i], 0) << "rank " << r;
    if (per_node < ranks && per_node > 1) {
      EXPECT_GT(in_rank_order[i], 0) << "rank " << r << ": the nodes' order is not the ranks'";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, SimNodes,
                         ::testing::Values(Nodes{4, 2}, Nodes{5, 2}, Nodes{6, 3}, Nodes{3, 1},
                                           Nodes{3, 3}),
                         [](const auto& info) {
                           return "ranks" + std::to_string(info.param.ranks) + "_nodes_of" +
                                  std::to_string(info.param.per_node);
                         });

TEST(SimNodes, RanksPerNodeBeyondTheRanksIsRefused) {
  EXPECT_THROW(run_simulated(2, [](ProcessGroup&) {}, {}, Target::Cpu, 3), InputError);
}

}  // namespace
}  // namespace noeira::dist
