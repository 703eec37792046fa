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
