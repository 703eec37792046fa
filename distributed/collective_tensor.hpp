#pragma once
// Tensors for the buffers a group's collectives read: in the group's shared memory where it has
// some (ProcessGroup::shared_memory: on one node over MPI, ops read such buffers in place),
// otherwise ordinary tensors of the group's buffer target.
#include "core/tensor.hpp"
#include "distributed/process_group.hpp"

namespace noeira::dist {

// Zero-filled. Collective over the group (every rank at the same point; the shapes may differ).
// A group whose buffers live on another target than `target` gives an ordinary tensor.
inline Tensor collective_tensor(ProcessGroup& group, Shape shape, Target target,
                                DType dtype = DType::F32) {
  if (target == group.buffer_target()) {
    const std::size_t bytes = storage_bytes(shape_numel(shape), dtype);
    if (std::shared_ptr<void> memory = group.shared_memory(bytes)) {
      return Tensor(std::move(shape), target, dtype, std::move(memory), bytes);
    }
  }
  return Tensor(std::move(shape), target, dtype);
}

}  // namespace noeira::dist
