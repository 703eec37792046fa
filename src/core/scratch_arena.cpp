#include "core/scratch_arena.hpp"

namespace noeira {

namespace {
thread_local ScratchArena* active_arena = nullptr;
}  // namespace

ScratchArena* ScratchArena::active() { return active_arena; }

std::shared_ptr<Storage> ScratchArena::next(Target target, std::size_t bytes) {
  if (cursor_ == slots_.size()) slots_.emplace_back();
  std::shared_ptr<Storage>& slot = slots_[cursor_++];
  if (!slot || slot->target() != target || slot->bytes() < bytes) {
    // Tensors of other blocks may still hold the old storage; it goes when they take the new one.
    slot = std::make_shared<Storage>(target, bytes, Storage::Kind::Scratch);
  }
  return slot;
}

bool ScratchArena::holds(const Tensor& t) const {
  if (!t.storage_) return false;
  for (const std::shared_ptr<Storage>& slot : slots_) {
    if (slot == t.storage_) return true;
  }
  return false;
}

ScratchPause::ScratchPause() : paused_(active_arena) { active_arena = nullptr; }

ScratchPause::~ScratchPause() { active_arena = paused_; }

ScratchScope::ScratchScope(ScratchArena& arena) : arena_(arena), previous_(active_arena) {
  // Only the outermost scope starts from slot 0: an inner one must not reuse the slots of the
  // outer one's buffers, which are still in use.
  if (arena_.open_scopes_++ == 0) arena_.cursor_ = 0;
  active_arena = &arena_;
}

ScratchScope::~ScratchScope() {
  --arena_.open_scopes_;
  active_arena = previous_;
}

}  // namespace noeira
