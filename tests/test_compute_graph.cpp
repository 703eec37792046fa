// ComputeGraph (nn/compute_graph.hpp) and the merge leaves (nn/merge.hpp): a graph that spells a
// chain, a residual or a parallel block computes those combinators' bits; a diamond's gradients
// match finite differences; Accumulate adds; the walk's names and order; and a graph with units
// and buffers trains under every policy as one rank does.
//
// The compile errors cannot be tests here; each was checked by hand once (g++ -fsyntax-only, the
// static_assert fires inside detail_graph::NodeChecks<Node<"name", ...>, ...>, naming the node):
//   - an edge naming no node                                   Node<"head", L, "stme">
//   - an edge naming a later node (forward reference)           Node<"a", L, "b">, Node<"b", ...>
//   - an edge naming its own node (a cycle)                     Node<"a", L, "a">
//   - two nodes of one name                                     Node<"a", ...>, Node<"a", ...>
//   - a node named "input" (or "")
//   - producer out_dim != consumer in_dim                       Linear<8, 16> -> Linear<12, 4>
//   - the same for a later input of a merge (input_dims)        Linear<8, 4> -> Concat<4, 5>'s 2nd
//   - two readers of "input" of different widths
//   - a node's output read by nobody (but the last node's)
//   - edges != the module's arity                               Add<16, 3> with two edges,
//                                                               Add<4> with one
//   - no node reads "input"
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "leaf_util.hpp"
#include "nn/batchnorm.hpp"
#include "nn/compute_graph.hpp"
#include "nn/cross_attention.hpp"
#include "nn/linear.hpp"
#include "nn/merge.hpp"
#include "nn/parallel.hpp"
#include "nn/residual.hpp"
#include "nn/sequential.hpp"
#include "nn/unit.hpp"
#include "train/supervised.hpp"
#include "small_runs.hpp"

namespace noeira {
namespace {

using testing::kLeafInit;
using testing::random_input;
using testing::random_values;

// The diamond of nn/compute_graph.hpp's header: fan-out at "stem", a merge at "sum".
using Diamond = ComputeGraph<Node<"stem", Linear<8, 16>, "input">,
                             Node<"a", LinearReLU<16, 16>, "stem">,
                             Node<"b", LinearTanh<16, 16>, "stem">,
                             Node<"sum", Add<16, 2>, "a", "b">,
                             Node<"head", Linear<16, 4>, "sum">>;
static_assert(Module<Diamond>);
static_assert(Diamond::in_dim == 8 && Diamond::out_dim == 4);
static_assert(MultiInputModule<Add<5, 3>> && MultiInputModule<Concat<2, 3>>);

// Nodes named as Sequential / Parallel name their children: same walk names, same init streams.
using Chain = Sequential<LinearTanh<6, 10>, LinearReLU<10, 10>, Linear<10, 3>>;
using ChainGraph = ComputeGraph<Node<"0", LinearTanh<6, 10>, "input">,
                                Node<"1", LinearReLU<10, 10>, "0">,
                                Node<"2", Linear<10, 3>, "1">>;
// Residual is transparent in the walk: its inner module is named as the Sequential's child.
using ResidualChain = Sequential<Linear<6, 10>, Residual<LinearTanh<10, 10>>, Linear<10, 3>>;
using ResidualGraph = ComputeGraph<Node<"0", Linear<6, 10>, "input">,
                                   Node<"1", LinearTanh<10, 10>, "0">,
                                   Node<"skip", Add<10, 2>, "0", "1">,
                                   Node<"2", Linear<10, 3>, "skip">>;
using ParallelChain =
    Sequential<Linear<6, 10>, Parallel<LinearReLU<10, 4>, LinearTanh<10, 5>>, Linear<9, 3>>;
using ParallelGraph = ComputeGraph<Node<"0", Linear<6, 10>, "input">,
                                   Node<"1.0", LinearReLU<10, 4>, "0">,
                                   Node<"1.1", LinearTanh<10, 5>, "0">,
                                   Node<"cat", Concat<4, 5>, "1.0", "1.1">,
                                   Node<"2", Linear<9, 3>, "cat">>;

struct Pass {
  std::vector<float> y, dx;
  std::vector<std::string> names;
  std::vector<std::vector<float>> values, grads;
};

template <Module M>
Pass run_pass(M& m, const Tensor& x, InputGrad input_grad = InputGrad::Compute) {
  Context ctx = Context::for_target(Target::Cpu);
  Pass p;
  const Tensor& y = m.forward(ctx, x);
  p.y = y.to_vector();
  const Tensor dy = Tensor::from_host(y.shape(), random_values(p.y.size(), 11));
  const Tensor& dx = m.vjp(ctx, dy, input_grad);
  if (dx.defined()) p.dx = dx.to_vector();
  for_each_param(m, [&](const std::string& name, Param& param) {
    p.names.push_back(name);
    p.values.push_back(param.val.to_vector());
    p.grads.push_back(param.grd.to_vector());
  });
  return p;
}

template <Module Reference, Module Graph>
void expect_same_bits() {
  Reference ref(kLeafInit);
  Graph graph(kLeafInit);
  for (std::int64_t rows : {1, 5}) {
    const Tensor x = random_input(rows, Graph::in_dim, 3);
    const Pass a = run_pass(ref, x);
    const Pass b = run_pass(graph, x);
    EXPECT_EQ(b.values, a.values) << "same names, same init streams";
    EXPECT_EQ(b.y, a.y);
    EXPECT_EQ(b.dx, a.dx);
    EXPECT_EQ(b.grads, a.grads);
    // Parameter names agree but for the merge nodes, which have none.
    EXPECT_EQ(b.names, a.names);
  }
}

TEST(ComputeGraph, ChainIsSequentialBitForBit) { expect_same_bits<Chain, ChainGraph>(); }

TEST(ComputeGraph, SkipAndAddIsResidualBitForBit) {
  expect_same_bits<ResidualChain, ResidualGraph>();
}

TEST(ComputeGraph, FanOutAndConcatIsParallelBitForBit) {
  expect_same_bits<ParallelChain, ParallelGraph>();
}

// The diamond with a smooth branch: ReLU's kink lies within a finite difference's step.
using SmoothDiamond = ComputeGraph<Node<"stem", Linear<8, 16>, "input">,
                                   Node<"a", LinearGELU<16, 16>, "stem">,
                                   Node<"b", LinearTanh<16, 16>, "stem">,
                                   Node<"sum", Add<16, 2>, "a", "b">,
                                   Node<"head", Linear<16, 4>, "sum">>;

TEST(ComputeGraph, DiamondGradientsMatchFiniteDifferences) {
  SmoothDiamond net(kLeafInit);
  for (std::int64_t rows : testing::test_row_counts(5)) {
    SCOPED_TRACE(rows);
    testing::gradcheck(net, random_input(rows, SmoothDiamond::in_dim, 17));
  }
}

// Three inputs to one merge, one of them the graph's input read twice; a Concat of unequal widths.
using ManyWays = ComputeGraph<Node<"p", LinearTanh<5, 5>, "input">,
                              Node<"q", Linear<5, 3>, "p">,
                              Node<"sum", Add<5, 3>, "input", "p", "input">,
                              Node<"cat", Concat<5, 3>, "sum", "q">,
                              Node<"head", LinearTanh<8, 2>, "cat">>;

TEST(ComputeGraph, MergesOfTheInputAndUnequalWidthsMatchFiniteDifferences) {
  ManyWays net(kLeafInit);
  testing::gradcheck(net, random_input(3, ManyWays::in_dim, 19));
}

// Any multi-input module is a merge: cross-attention of unequal widths (its input_dims).
using Attending = ComputeGraph<Node<"q", LinearTanh<8, 8>, "input">,
                               Node<"memory", LinearTanh<8, 6>, "input">,
                               Node<"attend", CrossAttention<8, 2, 6>, "q", "memory">,
                               Node<"head", Linear<8, 3>, "attend">>;

TEST(ComputeGraph, CrossAttentionNodeMatchesFiniteDifferences) {
  Attending net(kLeafInit);
  testing::gradcheck(net, Tensor::from_host({2, 3, 8}, random_values(48, 37)));
}

TEST(ComputeGraph, MergeLeavesMatchFiniteDifferences) {
  const auto check = [](auto& m, std::vector<Tensor> inputs) {
    testing::gradcheck_inputs(m, std::move(inputs), [&](Context& ctx, std::vector<Tensor>& in)
                                                        -> const Tensor& {
      if constexpr (std::remove_reference_t<decltype(m)>::arity == 2) {
        return m.forward(ctx, in[0], in[1]);
      } else {
        return m.forward(ctx, in[0], in[1], in[2]);
      }
    });
  };
  Add<4, 3> add(kLeafInit);
  check(add, {random_input(3, 4, 1), random_input(3, 4, 2), random_input(3, 4, 3)});
  Concat<2, 5> cat(kLeafInit);
  check(cat, {random_input(3, 2, 4), random_input(3, 5, 5)});
}

TEST(ComputeGraph, MergeLeavesRejectMismatchedInputs) {
  Context ctx = Context::for_target(Target::Cpu);
  Add<4, 2> add(kLeafInit);
  EXPECT_THROW(add.forward(ctx, random_input(3, 4, 1), random_input(2, 4, 2)), InputError);
  Concat<2, 3> cat(kLeafInit);
  EXPECT_THROW(cat.forward(ctx, random_input(3, 2, 1), random_input(2, 3, 2)), InputError);
}

TEST(ComputeGraph, SkipComputesNoInputGradientButTheSameParameterGradients) {
  Diamond a(kLeafInit);
  Diamond b(kLeafInit);
  const Tensor x = random_input(4, Diamond::in_dim, 23);
  const Pass compute = run_pass(a, x, InputGrad::Compute);
  const Pass skip = run_pass(b, x, InputGrad::Skip);
  EXPECT_FALSE(compute.dx.empty());
  EXPECT_TRUE(skip.dx.empty());
  EXPECT_EQ(skip.grads, compute.grads);
}

TEST(ComputeGraph, AccumulateAddsToExistingGradients) {
  Diamond net(kLeafInit);
  const Tensor x = random_input(3, Diamond::in_dim, 29);
  const Pass once = run_pass(net, x);  // Overwrite
  std::vector<std::vector<float>> before;
  std::uint32_t seed = 31;
  for_each_param(net, [&](const std::string&, Param& p) {
    before.push_back(random_values(static_cast<std::size_t>(p.numel()), seed++));
    p.grd.copy_from(before.back());
  });
  Context ctx = Context::for_target(Target::Cpu);
  ctx.grad_mode = GradMode::Accumulate;
  const Tensor& y = net.forward(ctx, x);
  const Tensor dy = Tensor::from_host(y.shape(), random_values(once.y.size(), 11));
  EXPECT_EQ(net.vjp(ctx, dy, InputGrad::Compute).to_vector(), once.dx) << "overwritten";
  std::size_t i = 0;
  for_each_param(net, [&](const std::string& name, Param& p) {
    const std::vector<float> g = p.grd.to_vector();
    // BLAS may add its product into the accumulator term by term: rounding at the tensor's scale.
    float scale = 1.0f;
    for (float v : once.grads[i]) scale = std::max(scale, std::abs(v));
    for (std::size_t k = 0; k < g.size(); ++k) {
      EXPECT_NEAR(g[k], before[i][k] + once.grads[i][k], 1e-5f * scale) << name << "[" << k << "]";
    }
    ++i;
  });
  EXPECT_EQ(i, once.grads.size());
}

// A graph inside a Sequential, with a BatchNorm node: prefixes nest, buffers come through.
using Branchy = ComputeGraph<Node<"stem", Linear<4, 6>, "input">,
                             Node<"norm", BatchNorm1D<6>, "stem">,
                             Node<"side", Linear<6, 6>, "stem">,
                             Node<"sum", Add<6, 2>, "norm", "side">>;

TEST(ComputeGraph, WalkNamesNodesInDeclarationOrder) {
  Sequential<Branchy, Linear<6, 2>> net(kLeafInit);
  std::vector<std::string> names, buffers;
  for_each_param(net, [&](const std::string& name, Param&) { names.push_back(name); });
  for_each_buffer(net, [&](const std::string& name, Tensor&) { buffers.push_back(name); });
  EXPECT_EQ(names, (std::vector<std::string>{"0.stem.weight", "0.stem.bias", "0.norm.weight",
                                             "0.norm.bias", "0.side.weight", "0.side.bias",
                                             "1.weight", "1.bias"}));
  EXPECT_EQ(buffers, (std::vector<std::string>{"0.norm.running_mean", "0.norm.running_var",
                                               "0.norm.num_batches_tracked"}));
  // node<"name">() is the module the walk visits under that name.
  Diamond d(kLeafInit);
  Param* walked = nullptr;
  for_each_param(d, [&](const std::string& name, Param& p) {
    if (name == "head.weight") walked = &p;
  });
  Param* own = nullptr;
  for_each_param(d.node<"head">(), [&](const std::string& name, Param& p) {
    if (name == "weight") own = &p;
  });
  EXPECT_NE(walked, nullptr);
  EXPECT_EQ(own, walked);
}

// Every node with parameters a unit, BatchNorm's buffers among them, merges outside any unit.
using NormedBranch = Sequential<Linear<16, 16>, BatchNorm1D<16>>;
using GraphModel = ComputeGraph<Node<"stem", Unit<LinearTanh<12, 16>>, "input">,
                                Node<"a", Unit<NormedBranch>, "stem">,
                                Node<"b", Unit<LinearReLU<16, 16>>, "stem">,
                                Node<"sum", Add<16, 3>, "stem", "a", "b">,
                                Node<"head", Unit<Linear<16, 5>>, "sum">>;
// The same without marks: one unit, the whole graph.
using UnmarkedGraphModel = ComputeGraph<Node<"stem", LinearTanh<12, 16>, "input">,
                                        Node<"a", Linear<16, 16>, "stem">,
                                        Node<"b", LinearReLU<16, 16>, "stem">,
                                        Node<"cat", Concat<16, 16>, "a", "b">,
                                        Node<"head", Linear<32, 5>, "cat">>;

template <Module M>
testing::TrainerRun train_graph(dist::Policy policy, int ranks) {
  // Batch 10: a last batch of 6.
  const testing::TrainerSetup setup{InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, 5},
                                    dist::PolicyOptions{64, 32}, {}};
  return testing::train_small_classifier<M>(policy, ranks, 1, setup, 10);
}

TEST(ComputeGraph, TrainsAsOneRankUnderEveryPolicy) {
  const testing::TrainerRun one = testing::expect_every_policy_trains_as_one_rank(
      [](dist::Policy p, int n) { return train_graph<GraphModel>(p, n); }, {2, 3});
  ASSERT_GE(one.losses.size(), 2u);
  EXPECT_LT(one.losses.back(), one.losses.front());
}

TEST(ComputeGraph, UnmarkedGraphTrainsAsOneRankUnderEveryPolicy) {
  testing::expect_every_policy_trains_as_one_rank(
      [](dist::Policy p, int n) { return train_graph<UnmarkedGraphModel>(p, n); }, {2});
}

}  // namespace
}  // namespace noeira
