#pragma once
// Which samples a step reads. The sample order of an epoch depends only on (seed, epoch) — never
// on the world size — and rank r of N takes a contiguous slice of each global batch, so the global
// batch, and with it the training run, is the same for any N (docs/design.md, "Contracts the tests pin").
#include <cstdint>
#include <vector>

#include "kernels/philox.hpp"

namespace noeira {

// A permutation of 0..n-1: Fisher-Yates driven by Philox at counter (epoch, i), so the result is
// the same on every platform and standard library (std::shuffle's is implementation-defined).
std::vector<std::int32_t> epoch_order(std::uint64_t seed, std::int64_t epoch, std::int64_t n);

// A uniform integer in [0, bound) from a Philox block's first 64 bits, by multiply-high: the
// bias is below bound / 2^64, far below anything a data order or a window draw can show. The
// data draws (epoch orders here, text windows in train/text_windows.hpp) share it.
std::uint64_t draw_below(const philox::Block& random, std::uint64_t bound);

// Rows [begin, end) of a batch.
struct RowRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
};

// Rank `rank` of `world` takes rows [rank*B/world, (rank+1)*B/world) of a global batch of B rows:
// as even as integer division allows (sizes differ by at most one), covering every row once.
RowRange shard_rows(std::int64_t global_rows, int rank, int world);

// The rows a rank computes on for its share `mine` of the batch `global`: its own or, when a short
// last batch leaves it none, the batch's first row as a stand-in. A rank must still run the
// forward (and, training, the vjp) of every step: those take part in the policy's collectives
// (ZeRO-3 gathers every unit, every policy reduces every gradient). Its caller counts nothing of
// a stand-in (training: a gradient scale of 0, no loss sum).
RowRange rows_to_compute(RowRange mine, RowRange global);

// Gradient accumulation (--accum): micro-batch `index` of the `count` an optimizer step takes.
// Micro-batch k is slice k of the global batch (as even as shard_rows makes it), which the ranks
// then split as they split a whole batch: the global batch, its data order and every row's
// dropout mask stay what they are at count 1.
struct MicroBatch {
  int index = 0;
  int count = 1;
};

// A batch smaller than the world leaves ranks without rows on every step, not only the last: an
// AgreedError naming --batch (every rank knows the numbers, so all of them refuse together). With
// accumulation every micro-batch must cover the ranks, and there can be no more micro-batches
// than rows.
void check_batch_covers_ranks(std::int64_t batch, int world, int accum = 1);

// Global batch `step` of an epoch of n samples with batch size B: rows [step*B, min((step+1)*B, n))
// of the epoch's order. The last batch is short when B does not divide n (kept, as PyTorch's
// DataLoader does by default).
RowRange global_batch(std::int64_t step, std::int64_t batch, std::int64_t n);
std::int64_t steps_per_epoch(std::int64_t batch, std::int64_t n);

}  // namespace noeira
