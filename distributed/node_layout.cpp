#include "distributed/node_layout.hpp"

#include <map>
#include <sstream>

#include "kernels/error.hpp"

namespace noeira::dist {

NodeLayout::NodeLayout(const std::vector<int>& node_of) {
  NOEIRA_CHECK(!node_of.empty(), "node layout: no ranks");
  std::map<int, int> number;  // label -> node index, in order of first (lowest) rank
  node_of_.reserve(node_of.size());
  for (std::size_t r = 0; r < node_of.size(); ++r) {
    const auto [it, added] = number.try_emplace(node_of[r], static_cast<int>(members_.size()));
    if (added) members_.emplace_back();
    node_of_.push_back(it->second);
    members_[static_cast<std::size_t>(it->second)].push_back(static_cast<int>(r));
  }
}

NodeLayout NodeLayout::one_node(int ranks) {
  return NodeLayout(std::vector<int>(static_cast<std::size_t>(ranks), 0));
}

NodeLayout NodeLayout::blocks(int ranks, int ranks_per_node) {
  NOEIRA_CHECK(ranks >= 1 && ranks_per_node >= 1, "node layout: ", ranks, " ranks in nodes of ",
               ranks_per_node);
  std::vector<int> node_of(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) node_of[static_cast<std::size_t>(r)] = r / ranks_per_node;
  return NodeLayout(node_of);
}

int NodeLayout::block_size() const {
  const int m = static_cast<int>(members_.front().size());
  if (ranks() % m != 0) return 0;
  for (int r = 0; r < ranks(); ++r) {
    if (node_of(r) != r / m) return 0;
  }
  return m;
}

std::string NodeLayout::describe() const {
  if (nodes() == 1) return "1 node";
  std::ostringstream os;
  os << nodes() << " nodes of ";
  if (block_size() != 0) {
    os << block_size();
  } else {
    for (int k = 0; k < nodes(); ++k) {
      os << (k == 0 ? "" : k + 1 == nodes() ? " and " : ", ")
         << members_[static_cast<std::size_t>(k)].size();
    }
  }
  os << " ranks";
  return os.str();
}

}  // namespace noeira::dist
