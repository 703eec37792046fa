#pragma once
// ScratchArena: storage shared by the buffers of every checkpointed module of one rank
// (nn/checkpointed.hpp). While a ScratchScope on the arena is alive, every Tensor::resize on this
// thread takes the arena's next slot instead of keeping or allocating storage of its own: the
// k-th tensor resized in the scope gets slot k, grown when too small. A checkpointed module runs
// its inner forward (and, in its vjp, the recomputed forward and the inner vjp) in such a scope
// and copies out what outlives the call, so all blocks of a model share one block's buffers.
//
// Scratch storage is valid only inside a scope: a tensor holding it that is resized outside one
// drops it and allocates its own (core/tensor.cpp), so a module run plainly after a checkpointed
// run never shares a buffer with another block. A scope opened while one is open continues the
// slot count (checkpointed modules nest without overwriting the outer one's buffers).
#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "core/tensor.hpp"

namespace noeira {

class ScratchArena {
 public:
  ScratchArena() = default;
  ScratchArena(const ScratchArena&) = delete;
  ScratchArena& operator=(const ScratchArena&) = delete;

  std::size_t slots() const { return slots_.size(); }
  // Whether t's storage is one of this arena's slots (views of one included).
  bool holds(const Tensor& t) const;

  // The arena of the innermost open scope on this thread, or null.
  static ScratchArena* active();

 private:
  friend class ScratchScope;
  friend class Tensor;
  // Storage of at least `bytes` on `target` for the next tensor resized in the scope.
  std::shared_ptr<Storage> next(Target target, std::size_t bytes);

  std::vector<std::shared_ptr<Storage>> slots_;
  std::size_t cursor_ = 0;
  int open_scopes_ = 0;
};

// Makes `arena` the active one on this thread for the life of the scope.
class ScratchScope {
 public:
  explicit ScratchScope(ScratchArena& arena);
  ~ScratchScope();
  ScratchScope(const ScratchScope&) = delete;
  ScratchScope& operator=(const ScratchScope&) = delete;

 private:
  ScratchArena& arena_;
  ScratchArena* previous_;
};

// The backward buffers of a chain of modules (Repeat's copies, Sequential's children: each link
// reads only the gradient the next link returned, and returns one only the link before it reads).
// Each link's vjp runs in a ScratchScope on one of two arenas, the one that does not hold the
// gradient it reads, so every buffer a link's vjp sizes shares storage with those of every link
// but its neighbours: two links' worth for the chain. A link's vjp must size only backward buffers
// (none its forward filled). The chain outermost on the call stack owns them: inside another
// scope (an enclosing chain's link, a checkpointed block) a link's buffers are already that
// scope's slots, and ctx.shared_vjp_buffers = false gives every link its own.
class ChainArenas {
 public:
  // Runs vjp() (a link's vjp, given the gradient g it reads) in the arena that does not hold g,
  // or plainly where the chain shares nothing (above).
  template <class Vjp>
  decltype(auto) run(bool shared, const Tensor& g, Vjp&& vjp) {
    if (!shared || ScratchArena::active() != nullptr) return vjp();
    if (!arenas_) arenas_ = std::make_unique<std::array<ScratchArena, 2>>();
    std::array<ScratchArena, 2>& a = *arenas_;
    ScratchScope scope(a[0].holds(g) ? a[1] : a[0]);
    return vjp();
  }

 private:
  std::unique_ptr<std::array<ScratchArena, 2>> arenas_;  // on first use; movable with its chain
};

// Suspends the active arena for the life of the scope: what runs inside (a sharding policy's unit
// hooks, which keep buffers of their own) allocates as if no scope were open.
class ScratchPause {
 public:
  ScratchPause();
  ~ScratchPause();
  ScratchPause(const ScratchPause&) = delete;
  ScratchPause& operator=(const ScratchPause&) = delete;

 private:
  ScratchArena* paused_;
};

}  // namespace noeira
