#pragma once
// Repeat<K, M>: K independent copies of M applied in sequence, as Sequential<M, ..., M> would
// (copy i is named "i" in the walk and initialized from its own path, so the copies differ).
//
// The copies are a chain: their backward buffers (input gradients, the attention scores'
// gradient, ...) share two copies' storage (core/scratch_arena.hpp's ChainArenas), where each
// copy held its own.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "core/module.hpp"
#include "core/scratch_arena.hpp"

namespace noeira {

template <std::size_t K, Module M>
class Repeat {
  static_assert(K > 0, "Repeat needs at least one copy");
  static_assert(M::in_dim == M::out_dim, "Repeat<K, M>: M's out_dim must equal its in_dim");

 public:
  static constexpr int arity = M::arity;
  static constexpr std::int64_t in_dim = M::in_dim;
  static constexpr std::int64_t out_dim = M::out_dim;

  explicit Repeat(const Init& init) : copies_(build(init, std::make_index_sequence<K>{})) {}

  const Tensor& forward(Context& ctx, const Tensor& x) {
    const Tensor* h = &x;
    for (M& m : copies_) h = &m.forward(ctx, *h);
    return *h;
  }

  const Tensor& vjp(Context& ctx, const Tensor& dy, InputGrad input_grad) {
    const Tensor* g = &dy;
    for (std::size_t i = K; i-- > 0;) {
      const InputGrad wanted = i == 0 ? input_grad : InputGrad::Compute;
      g = &arenas_.run(ctx.shared_vjp_buffers, *g,
                       [&]() -> const Tensor& { return copies_[i].vjp(ctx, *g, wanted); });
    }
    return *g;
  }

  template <class Visitor>
  void for_each_param(Visitor&& visit, std::string_view prefix) {
    for (std::size_t i = 0; i < K; ++i) {
      copies_[i].for_each_param(visit, join_name(prefix, std::to_string(i)));
    }
  }

  M& copy(std::size_t i) { return copies_.at(i); }

 private:
  template <std::size_t... Is>
  static std::array<M, K> build(const Init& init, std::index_sequence<Is...>) {
    return {M(init.child(Is))...};
  }

  std::array<M, K> copies_;
  ChainArenas arenas_;  // the copies' backward buffers
};

}  // namespace noeira
