#pragma once
// Repeat<K, M>: K independent copies of M applied in sequence, as Sequential<M, ..., M> would
// (copy i is named "i" in the walk and initialized from its own path, so the copies differ).
//
// Backward memory: each copy's vjp runs in a ScratchScope (core/scratch_arena.hpp) on one of two
// arenas, the one that does not hold the gradient it reads, so every buffer a copy's vjp sizes
// (its input gradient, the attention scores' gradient, ...) shares storage with those of every
// other copy but its neighbours: two copies' worth for all K, where each copy held its own. A copy
// reads only the gradient the copy after it returned, which lies in the other arena, and returns
// one that only the copy before it reads: the chain is why this is safe here and not in general.
// A copy's vjp must size only backward buffers (none its forward filled), and a Unit's hooks run
// outside the scope (nn/unit.hpp). ctx.shared_vjp_buffers = false gives each copy its own.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
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
      if (!ctx.shared_vjp_buffers) {
        g = &copies_[i].vjp(ctx, *g, wanted);
        continue;
      }
      std::array<ScratchArena, 2>& arenas = *arenas_;
      ScratchScope scope(arenas[0].holds(*g) ? arenas[1] : arenas[0]);
      g = &copies_[i].vjp(ctx, *g, wanted);
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
  // The copies' backward buffers (above); on the heap, so that a Repeat moves like its copies.
  std::unique_ptr<std::array<ScratchArena, 2>> arenas_ =
      std::make_unique<std::array<ScratchArena, 2>>();
};

}  // namespace noeira
