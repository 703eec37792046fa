#pragma once
// The Module concept. A network is a type composed at compile time from leaves and combinators.
//
// Every module:
//  - has static dims: arity (number of inputs), in_dim (the input's last dimension), out_dim (the
//    output's last dimension). Activations may carry any leading dimensions: a module that acts on
//    the last dimension (Linear, norms, activations, dropout) sees [B, T, C] as B·T rows of C and
//    keeps the leading dimensions in its output; a module that needs the structure (attention,
//    positional encodings) reads B and T from the shape. A width mismatch between static widths
//    is a compile error (Sequential checks the chain); a run-time shape error names the module;
//  - is constructed from an Init (target, initializer, its dotted path): parameters are
//    initialized there, with no separate pass;
//  - forward(ctx, x) -> const Tensor&: the output, in a buffer the module owns and resizes to the
//    run-time number of rows; it remembers x for its vjp (x must stay alive until then);
//  - vjp(ctx, dy, InputGrad) -> const Tensor&: writes parameter gradients (per ctx.grad_mode)
//    BEFORE the input gradient, reads everything it needs before writing, and returns the input
//    gradient (an undefined tensor when InputGrad::Skip);
//  - for_each_param(visitor, prefix): visits every Param in a fixed order as visitor(name, param)
//    with the dotted name prefix + "." + local name. This walk is the only registry of parameters.
//    It is also the registry of buffers: state that is not a parameter (BatchNorm's running
//    statistics), which no optimizer touches and no policy shards, but which checkpoints, model
//    files and evaluation carry. A leaf with buffers calls visit_buffer(visit, prefix, name, t)
//    in its walk, which reaches visitors that take buffers (visitor.buffer(name, tensor)) and
//    skips the others, so combinators pass buffers on without knowing of them.
//
// Modules with more than one input (arity > 1: attention's q, k, v; cross-attention's x and
// memory) take them in order, forward(ctx, x0, x1, ...), and remember them all for the vjp.
// vjp(ctx, dy, InputGrad) returns the gradient of x0, and input_grad(i) the gradient of input i
// from that vjp (i = 0 is x0's again); InputGrad::Skip skips every input gradient. They do not
// satisfy Module, whose forward takes one input; MultiInputModule checks the rest of the contract.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/context.hpp"
#include "core/error.hpp"
#include "core/init.hpp"
#include "core/param.hpp"
#include "core/tensor.hpp"

namespace noeira {

// The shape of a walk visitor, for the concept check only.
struct ParamVisitorArchetype {
  void operator()(const std::string& name, Param& param) const;
};

template <class M>
concept Module = requires(M& m, Context& ctx, const Tensor& t, const ParamVisitorArchetype& visit,
                          std::string_view prefix) {
  { M::arity } -> std::convertible_to<int>;
  { M::in_dim } -> std::convertible_to<std::int64_t>;
  { M::out_dim } -> std::convertible_to<std::int64_t>;
  { m.forward(ctx, t) } -> std::same_as<const Tensor&>;
  { m.vjp(ctx, t, InputGrad::Compute) } -> std::same_as<const Tensor&>;
  m.for_each_param(visit, prefix);
} && std::constructible_from<M, const Init&>;

template <class M>
concept MultiInputModule =
    requires(M& m, const M& cm, Context& ctx, const Tensor& t,
             const ParamVisitorArchetype& visit, std::string_view prefix) {
      { M::arity } -> std::convertible_to<int>;
      requires M::arity > 1;
      { M::in_dim } -> std::convertible_to<std::int64_t>;
      { M::out_dim } -> std::convertible_to<std::int64_t>;
      { m.vjp(ctx, t, InputGrad::Compute) } -> std::same_as<const Tensor&>;
      { cm.input_grad(1) } -> std::same_as<const Tensor&>;
      m.for_each_param(visit, prefix);
    } && std::constructible_from<M, const Init&>;

// The vocabulary of a model whose inputs are ids, not floats: the `input_vocab` of its first
// module, an embedding (nn/embedding.hpp); 0 for a model of float inputs. The data loader then
// reads the features as int32 ids and checks each against it (train/array_dataset.hpp).
template <class M>
constexpr std::int64_t input_vocab_of() {
  if constexpr (requires { M::input_vocab; }) {
    return M::input_vocab;
  } else {
    return 0;
  }
}

// Visits every parameter of a network with its dotted name.
template <class M, class Visitor>
  requires Module<M> || MultiInputModule<M>
void for_each_param(M& model, Visitor&& visit) {
  model.for_each_param(visit, std::string_view{});
}

// The buffer visit of a leaf's walk (see the contract above).
template <class Visitor>
void visit_buffer(Visitor& visit, std::string_view prefix, std::string_view name, Tensor& buffer) {
  if constexpr (requires(const std::string& n) { visit.buffer(n, buffer); }) {
    visit.buffer(join_name(prefix, name), buffer);
  }
}

// What a walk reports besides parameters and buffers, to visitors that ask (visitor.site(kind)):
// a checkpointed module (nn/checkpointed.hpp), a module that holds its output in bf16
// (core/bf16_activation.hpp). Combinators pass the reports on without knowing of them.
enum class WalkSite : std::uint8_t { Checkpointed, Bf16Output };

template <class Visitor>
void visit_site(Visitor& visit, WalkSite kind) {
  if constexpr (requires { visit.site(kind); }) visit.site(kind);
}

// How many sites of one kind a model's walk reports.
template <class M>
std::size_t walk_sites(M& model, WalkSite kind) {
  struct Counter {
    WalkSite kind;
    std::size_t sites = 0;
    void operator()(const std::string&, Param&) const {}
    void site(WalkSite reported) { sites += reported == kind ? 1 : 0; }
  };
  Counter counter{kind};
  model.for_each_param(counter, std::string_view{});
  return counter.sites;
}

namespace detail_walk {
template <class F>
struct BufferVisitor {
  F& f;
  void operator()(const std::string&, Param&) const {}
  void buffer(const std::string& name, Tensor& t) const { f(name, t); }
};
}  // namespace detail_walk

// Visits every buffer of a network as f(name, tensor), in walk order.
template <class M, class F>
  requires Module<M> || MultiInputModule<M>
void for_each_buffer(M& model, F&& f) {
  detail_walk::BufferVisitor<std::remove_reference_t<F>> visitor{f};
  model.for_each_param(visitor, std::string_view{});
}

template <class M>
  requires Module<M> || MultiInputModule<M>
std::int64_t parameter_count(M& model) {
  std::int64_t n = 0;
  for_each_param(model, [&](const std::string&, Param& p) { n += p.numel(); });
  return n;
}

// The rows of an input to a module of width in_dim: the shortest run of trailing dimensions whose
// product is in_dim is one row, every dimension before it counts rows. So [B, T, C] is B·T rows
// of C, an image batch [rows, C, H, W] is rows of C·H·W for a module of that width, and token ids
// [B, T] are B·T rows of one id (width 1: no trailing dimension at all). `leading` is how many
// dimensions count rows; -1 when no run of trailing dimensions has the product in_dim.
struct InputRows {
  std::int64_t rows = 0;
  int leading = -1;
};
InputRows input_rows(const Shape& shape, std::int64_t in_dim);

// Checks that a forward input has rows of the module's width (input_rows) and lives on the
// context's target (a kernel handed the other target's memory would crash or read garbage);
// names the module. Returns the number of rows.
std::int64_t check_input_rows(const Context& ctx, const Tensor& x, std::int64_t in_dim,
                              std::string_view module);

// The output shape of a module of width in_dim -> out_dim on an input of shape `in`: the input's
// row dimensions, then out_dim.
Shape output_shape(const Shape& in, std::int64_t in_dim, std::int64_t out_dim);

}  // namespace noeira
