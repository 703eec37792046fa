#pragma once
// ComputeGraph<Node<"name", M, "edge", ...>, ...>: a DAG of modules with named edges, for models
// that are not a chain (several skips, a shared trunk with several heads that merge, ...).
//
//   using Net = ComputeGraph<
//       Node<"stem", Linear<8, 16>, "input">,
//       Node<"a", LinearReLU<16, 16>, "stem">,
//       Node<"b", LinearTanh<16, 16>, "stem">,
//       Node<"sum", Add<16, 2>, "a", "b">,      // a merge: an arity-2 module (nn/merge.hpp)
//       Node<"head", Linear<16, 4>, "sum">>;
//
// A node's edges name earlier nodes, or "input", the graph's one input; the last node is the
// graph's output. Declaration order is the topological order, so a cycle cannot be written: a
// node naming itself or a later node, a name no node has, two nodes of one name, a node whose
// output nothing reads (but the last), a module that does not take as many inputs as the node
// names (a Module for one, a MultiInputModule of that arity for more) and an edge whose
// producer's out_dim is not the consumer's width for that input (M::input_dims[i] where the
// module lists them, else M::in_dim) are compile errors; the static_assert fires inside
// detail_graph::NodeChecks<Node<...>, index, ...>, whose arguments in the diagnostic name the node.
//
// forward runs the nodes in declaration order. vjp runs them in reverse; a node output read by
// several consumers gets the sum of their gradients, added in consumer declaration order (then
// input order within a consumer), so the rounding is fixed by the graph alone; one consumer's
// gradient is passed on without a copy. A node asks for its input gradient unless all its edges
// read "input" and the graph's vjp is called with InputGrad::Skip.
//
// Walk and init: node "name" is constructed with init.named_child("name") and walked with the
// prefix "<graph prefix>.name", in declaration order (buffers and unit marks pass through as the
// other combinators pass them). A name is a path component and may contain dots: nodes "0", "1.0"
// name their parameters as Sequential<A, Parallel<B, ...>> does, init streams included.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <utility>

#include "core/module.hpp"

namespace noeira {

// A string literal as a template argument (a node's name, its edges).
template <std::size_t N>
struct fixed_string {
  char chars[N] = {};
  // Implicit, so that Node<"stem", ...> reads as a literal.
  constexpr fixed_string(const char (&s)[N]) { std::copy_n(s, N, chars); }  // NOLINT
  constexpr std::string_view view() const { return {chars, N - 1}; }
};

// The edge name of a graph's input.
inline constexpr std::string_view kGraphInput = "input";

template <fixed_string Name, class M, fixed_string... Inputs>
struct Node {
  using module_type = M;
  static constexpr std::string_view name = Name.view();
  static constexpr std::array<std::string_view, sizeof...(Inputs)> inputs = {Inputs.view()...};
};

namespace detail_graph {

// An edge's source besides a node index.
inline constexpr int kInput = -1;      // the graph's input
inline constexpr int kNoSuchNode = -2;
inline constexpr int kLaterNode = -3;  // the consumer itself or a node after it

struct Edge {
  int source = kNoSuchNode;
  std::size_t consumer = 0;
  std::int64_t width = 0;  // the consumer's width for this input
};

template <class M>
constexpr std::int64_t input_width(std::size_t slot) {
  if constexpr (requires { M::input_dims; }) {
    return slot < M::input_dims.size() ? M::input_dims[slot] : 0;
  } else {
    return M::in_dim;
  }
}

template <std::size_t N>
constexpr int find_source(const std::array<std::string_view, N>& names, std::string_view name,
                          std::size_t consumer) {
  if (name == kGraphInput) return kInput;
  for (std::size_t j = 0; j < N; ++j) {
    if (names[j] == name) return j < consumer ? static_cast<int>(j) : kLaterNode;
  }
  return kNoSuchNode;
}

template <class... Nodes>
struct Topology {
  static constexpr std::size_t count = sizeof...(Nodes);
  static constexpr std::array<std::string_view, count> names = {Nodes::name...};
  static constexpr std::array<std::int64_t, count> out_dims = {Nodes::module_type::out_dim...};
  static constexpr std::size_t edge_count = (Nodes::inputs.size() + ...);
  // Edges in consumer declaration order, then input order: node i's are first_edge[i], ...
  static constexpr std::array<std::size_t, count> first_edge = [] {
    std::array<std::size_t, count> first{};
    std::size_t at = 0, i = 0;
    ((first[i++] = at, at += Nodes::inputs.size()), ...);
    return first;
  }();
  static constexpr std::array<Edge, edge_count> edges = [] {
    std::array<Edge, edge_count> out{};
    std::size_t at = 0, consumer = 0;
    const auto add = [&]<class N>(N*) {
      for (std::size_t s = 0; s < N::inputs.size(); ++s) {
        out[at++] = {find_source(names, N::inputs[s], consumer), consumer,
                     input_width<typename N::module_type>(s)};
      }
      ++consumer;
    };
    (add(static_cast<Nodes*>(nullptr)), ...);
    return out;
  }();
  // The graph's width: its first reader's (every other reader is checked against it).
  static constexpr std::int64_t in_dim = [] {
    for (const Edge& e : edges) {
      if (e.source == kInput) return e.width;
    }
    return std::int64_t{0};
  }();

  static constexpr std::int64_t producer_width(int source) {
    return source == kInput ? in_dim : out_dims[static_cast<std::size_t>(source)];
  }
  static constexpr bool used(int source) {
    return std::ranges::any_of(edges, [&](const Edge& e) { return e.source == source; });
  }
};

template <class NodeT, std::size_t I, class Topo>
struct NodeChecks {
  using M = typename NodeT::module_type;
  static constexpr std::size_t arity = NodeT::inputs.size();
  static constexpr auto own_edges = [] {
    std::array<Edge, arity> out{};
    std::copy_n(Topo::edges.begin() + Topo::first_edge[I], arity, out.begin());
    return out;
  }();
  template <class Pred>
  static constexpr bool every_edge(Pred pred) {
    return std::ranges::all_of(own_edges, pred);
  }

  static_assert(arity > 0, "ComputeGraph: a node needs at least one input edge");
  static_assert(!NodeT::name.empty() && NodeT::name != kGraphInput,
                "ComputeGraph: a node's name must be non-empty and not \"input\"");
  static_assert(std::ranges::count(Topo::names, NodeT::name) == 1,
                "ComputeGraph: two nodes have this name");
  static_assert(every_edge([](const Edge& e) { return e.source != kNoSuchNode; }),
                "ComputeGraph: an edge of this node names no node (nor \"input\")");
  static_assert(every_edge([](const Edge& e) { return e.source != kLaterNode; }),
                "ComputeGraph: an edge of this node names itself or a later node; edges must "
                "name earlier nodes (declaration order is the topological order: no cycles)");
  static_assert(
      [] {
        if constexpr (arity == 1) {
          return Module<M>;
        } else if constexpr (MultiInputModule<M>) {
          return M::arity == static_cast<int>(arity);
        } else {
          return false;
        }
      }(),
      "ComputeGraph: this node's module does not take as many inputs as the node has edges "
      "(a Module for one, a MultiInputModule of that arity for more)");
  static_assert(every_edge([](const Edge& e) {
                  return e.source < kInput || Topo::producer_width(e.source) == e.width;
                }),
                "ComputeGraph: an edge's producer out_dim differs from this node's width for "
                "that input (the graph's input: the width of its first reader)");
  static_assert(I + 1 == Topo::count || Topo::used(static_cast<int>(I)),
                "ComputeGraph: nothing reads this node's output (only the last node is the "
                "graph's output)");
  static constexpr bool ok = true;
};

template <class Topo, class... Nodes, std::size_t... Is>
constexpr bool check_nodes(std::index_sequence<Is...>) {
  return (NodeChecks<Nodes, Is, Topo>::ok && ...);
}

}  // namespace detail_graph

template <class... Nodes>
class ComputeGraph {
  static_assert(sizeof...(Nodes) > 0, "ComputeGraph needs at least one node");
  using Topo = detail_graph::Topology<Nodes...>;
  static constexpr std::size_t count = Topo::count;
  static_assert(detail_graph::check_nodes<Topo, Nodes...>(std::index_sequence_for<Nodes...>{}));
  static_assert(Topo::used(detail_graph::kInput), "ComputeGraph: no node reads \"input\"");

  template <std::size_t I>
  using NodeAt = std::tuple_element_t<I, std::tuple<Nodes...>>;

 public:
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = Topo::in_dim;
  static constexpr std::int64_t out_dim = Topo::out_dims[count - 1];

  explicit ComputeGraph(const Init& init)
      : nodes_(typename Nodes::module_type(init.named_child(Nodes::name))...) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    check_input_rows(ctx, x, in_dim, "ComputeGraph");
    input_ = &x;
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (forward_node<Is>(ctx), ...);
    }(std::index_sequence_for<Nodes...>{});
    return *outs_[count - 1];
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (vjp_node<count - 1 - Is>(ctx, dy, input_grad), ...);
    }(std::index_sequence_for<Nodes...>{});
    return input_grad == InputGrad::Compute ? output_grad(ctx, detail_graph::kInput) : empty_;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (std::get<Is>(nodes_).for_each_param(visit, join_name(prefix, Topo::names[Is])), ...);
    }(std::index_sequence_for<Nodes...>{});
  }

  // The module of the node of this name: graph.template node<"stem">().
  template <fixed_string Name>
  auto& node() {
    constexpr int i = detail_graph::find_source(Topo::names, Name.view(), count);
    static_assert(i >= 0, "ComputeGraph::node: no node has this name");
    return std::get<static_cast<std::size_t>(i)>(nodes_);
  }

 private:
  const Tensor& source_tensor(int source) const {
    return source == detail_graph::kInput ? *input_ : *outs_[static_cast<std::size_t>(source)];
  }

  template <std::size_t I>
  void forward_node(Context& ctx) {
    constexpr std::size_t first = Topo::first_edge[I];
    outs_[I] = [&]<std::size_t... Js>(std::index_sequence<Js...>) {
      return &std::get<I>(nodes_).forward(ctx, source_tensor(Topo::edges[first + Js].source)...);
    }(std::make_index_sequence<NodeAt<I>::inputs.size()>{});
  }

  template <std::size_t I>
  void vjp_node(Context& ctx, const Tensor& dy, InputGrad graph_input_grad) {
    constexpr std::size_t first = Topo::first_edge[I];
    constexpr std::size_t arity = NodeAt<I>::inputs.size();
    constexpr bool reads_a_node = [] {
      for (std::size_t e = first; e < first + arity; ++e) {
        if (Topo::edges[e].source >= 0) return true;
      }
      return false;
    }();
    const bool compute = reads_a_node || graph_input_grad == InputGrad::Compute;
    auto& node = std::get<I>(nodes_);
    const Tensor& g = I + 1 == count ? dy : output_grad(ctx, static_cast<int>(I));
    const Tensor& dx = node.vjp(ctx, g, compute ? InputGrad::Compute : InputGrad::Skip);
    if (!compute) return;
    edge_grads_[first] = &dx;
    if constexpr (arity > 1) {
      for (std::size_t s = 1; s < arity; ++s) {
        edge_grads_[first + s] = &node.input_grad(static_cast<int>(s));
      }
    }
  }

  // The gradient of a source's output: its consumers' input gradients (each valid until that
  // consumer's next vjp), summed in edge order.
  const Tensor& output_grad(Context& ctx, int source) {
    const Tensor* first = nullptr;
    Tensor& sum = sums_[static_cast<std::size_t>(source + 1)];
    bool summed = false;
    for (std::size_t e = 0; e < Topo::edge_count; ++e) {
      if (Topo::edges[e].source != source) continue;
      const Tensor& g = *edge_grads_[e];
      if (first == nullptr) {
        first = &g;
        continue;
      }
      NOEIRA_CHECK(g.numel() == first->numel(), "ComputeGraph: a node's consumers disagree on "
                                                "the size of its output gradient");
      if (!summed) {
        sum.resize(first->shape(), ctx.target);
        ctx.k->copy(ctx.stream, sum.data(), first->data(),
                    static_cast<std::size_t>(first->numel()) * sizeof(float));
        summed = true;
      }
      ctx.k->accumulate(ctx.stream, sum.data(), g.data(), g.numel());
    }
    return summed ? sum : *first;
  }

  std::tuple<typename Nodes::module_type...> nodes_;
  const Tensor* input_ = nullptr;                               // of the last forward
  std::array<const Tensor*, count> outs_{};                     // each node's last output
  std::array<const Tensor*, Topo::edge_count> edge_grads_{};    // each edge's input gradient
  std::array<Tensor, count + 1> sums_;  // [0]: the input's, [i + 1]: node i's fan-in sum
  Tensor empty_;
};

}  // namespace noeira
