#pragma once
// The trainer's side of rank-sharded checkpoints (io/checkpoint.hpp): what a run saves, which
// slices each rank writes, and how a run (any world size, any policy) reads back the ranges it
// holds. io/ knows no process groups; the barriers and the agreement live here.
#include <cstdint>
#include <filesystem>

#include "distributed/policy.hpp"
#include "io/checkpoint.hpp"
#include "io/checkpoint_lock.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "train/config.hpp"

namespace noeira {

// Where a run is: the cursor is global samples consumed, so it means the same for any N (the
// epoch order is a function of (seed, epoch) only).
struct TrainCursor {
  std::int64_t step = 0;          // optimizer steps completed
  std::int64_t samples_seen = 0;  // global training samples consumed
  // This rank's loss sums of the epoch in progress and of the current log window, and the global
  // samples in that window: a run resumed at the same N logs the very losses of an uninterrupted
  // one (at another N, rank 0 carries the whole sums: equal up to the order of additions).
  double epoch_loss_sum = 0.0;
  double window_loss_sum = 0.0;
  std::int64_t window_samples = 0;
};

// Names and shapes of the walk: the model signature a checkpoint is checked against.
io::Signature signature_of(const dist::WalkUnits& walk);

// Every rank writes its slice of every parameter (values, and m / v when the optimizer has
// them), then, after every rank succeeded, rank 0 commits. Collective; throws on every rank when
// any rank failed. Returns the committed step directory.
std::filesystem::path save_checkpoint(dist::ShardingPolicy& policy, const dist::WalkUnits& walk,
                                      const Optimizer& optimizer, const LrSchedule& schedule,
                                      const TrainConfig& cfg, std::int64_t train_samples,
                                      const TrainCursor& cursor);

// Reads the ranges this rank holds under its policy from the checkpoint at `path` (as
// io::resolve_checkpoint accepts), whatever world size and policy wrote it, and restores the
// optimizer's step state. Refuses another model (signature), another optimizer, batch, seed or
// training set size (the data cursor would mean something else), another data set, and non-finite
// values unless cfg.allow_non_finite. Returns where to continue. Collective over the policy's
// group: a refusal that every rank reaches is an AgreedError (said once, by rank 0).
TrainCursor load_checkpoint(const std::filesystem::path& path, dist::ShardingPolicy& policy,
                            const dist::WalkUnits& walk, Optimizer& optimizer,
                            const TrainConfig& cfg, std::int64_t train_samples);

// Takes cfg.checkpoint_dir for this run (io::CheckpointDirLock: created, writable, no other run in
// it) for as long as the lock lives. A directory holding committed checkpoints is another run's
// unless this run resumes from one of them: refused (InputError naming both ways out), or, with
// --overwrite-checkpoints, emptied when the run begins (discard_replaced_checkpoints). One
// caller per run: rank 0, or the process of simulated ranks.
io::CheckpointDirLock claim_checkpoint_dir(const TrainConfig& cfg);
// Under --overwrite-checkpoints, discards the checkpoints the claimed directory holds; called
// (with the lock held) when the run's records begin, so that a refused run keeps them.
void discard_replaced_checkpoints(const TrainConfig& cfg);

// --resume: "latest" in cfg.checkpoint_dir, or a path.
std::filesystem::path resume_path(const TrainConfig& cfg);

}  // namespace noeira
