#pragma once
// The batch a step reads: this rank's rows of the global batch, gathered from the in-memory data
// set into tensors that keep their storage from step to step (a short last batch shrinks the
// shape, never reallocates).
#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.hpp"
#include "train/dataset.hpp"
#include "train/order.hpp"

namespace noeira {

struct Batch {
  explicit Batch(Target target = Target::Cpu)
      : x({0, 0}, target), labels({0}, target, DType::I32) {}

  Tensor x;       // [rows, features] F32
  Tensor labels;  // [rows] I32
  // Host staging for targets whose memory the host cannot write (CUDA); unused on the CPU.
  std::vector<float> host_x;
  std::vector<std::int32_t> host_labels;
};

// This rank's rows of a global batch: rows `global` of the epoch order, split by shard_rows.
RowRange local_rows(RowRange global, int rank, int world);

// Fills `out` with samples order[rows.begin .. rows.end) of `data` (positions into `order`), or
// samples rows.begin .. rows.end themselves when `order` is empty (evaluation in file order).
void gather_batch(Batch& out, const Dataset& data, std::span<const std::int32_t> order,
                  RowRange rows);

}  // namespace noeira
