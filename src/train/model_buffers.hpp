#pragma once
// Buffers (core/module.hpp) where the trainer stores them: in a checkpoint as whole tensors
// "buffers/<name>" that rank 0 writes (every rank holds the same, or rank 0's are the model's:
// distributed/buffer_sync.hpp) and every rank reads back whole, and in model.h5 beside the
// parameters. Host copies go through here, so device buffers are staged once, in one place.
#include <string>
#include <vector>

#include "distributed/param_store.hpp"
#include "io/checkpoint.hpp"
#include "io/checkpoint_reader.hpp"
#include "io/params_file.hpp"
#include "core/finite.hpp"

namespace noeira {

// "buffers/<name>": a buffer's tensor in a checkpoint.
std::string buffer_tensor_name(const std::string& buffer);

// Names and shapes of the walk's buffers, in walk order.
io::Signature buffer_signature(const dist::WalkUnits& walk);

// Every buffer's values on the host, concatenated in walk order.
std::vector<float> buffer_values(const dist::WalkUnits& walk);

// The checkpoint slices of the buffers, whole, over `host` (from buffer_values).
std::vector<io::TensorSlice> buffer_slices(const dist::WalkUnits& walk,
                                           const std::vector<float>& host);

// Reads every buffer of the walk from a checkpoint: a buffer the checkpoint lacks, one of
// another shape, one the model does not have, or a non-finite value (unless allowed) is an
// InputError naming the checkpoint and the buffer.
void load_buffers(const io::CheckpointReader& ckpt, const dist::WalkUnits& walk,
                  NonFinite non_finite);

}  // namespace noeira
