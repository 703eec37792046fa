#pragma once
// Rank-sharded HDF5 checkpoints: writing a rank's file and committing a checkpoint (the
// on-disk layout is docs/checkpoint-format.md). Reading is
// io/checkpoint_reader.hpp.
//
//   <ckpt_dir>/step-00000120/rank-00000.h5 ... rank-<N-1>.h5   one committed checkpoint
//   <ckpt_dir>/latest                                           "step-00000120\n"
//   <ckpt_dir>/.tmp-step-00000140/                               being written: never read
//
// Why one file per rank rather than one shared file written through parallel HDF5: it needs no
// collective MPI-IO (a rank that dies mid-write cannot hang the others inside HDF5), the
// simulated backend writes the very same layout (N threads, N files; HDF5 itself is serialized
// by io/h5.hpp's lock, fsync is not), and a missing rank's file is visible as a missing file.
//
// Protocol, composed by the trainer (io/ knows no process groups; the barrier is the caller's):
//   every rank:  write_rank_file(dir, rank, meta, my_slices);   // .tmp-step-N/rank-r.h5, fsynced
//   barrier (and agree that every rank succeeded)
//   rank 0:      commit_checkpoint(dir, step, world_size, keep_last);
//   barrier (only if other ranks read the checkpoint right after)
// commit renames .tmp-step-N to step-N and replaces `latest` last, each made durable with fsync
// before the next, so a crash (kill -9) at any moment leaves `latest` naming a complete
// checkpoint, either the previous one or the new one.
//
// Thread safety: any function here may run on several threads at once (one per simulated rank).
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.hpp"

namespace noeira::io {

inline constexpr int kCheckpointFormatVersion = 1;

// One parameter of the model signature: the walk's dotted name and the logical shape.
struct SignatureEntry {
  std::string name;  // "0.weight"
  Shape shape;
  friend bool operator==(const SignatureEntry&, const SignatureEntry&) = default;
};
using Signature = std::vector<SignatureEntry>;  // walk order

// The optimizer's step state (Adam's bias corrections; SGD leaves the defaults).
struct OptimizerStep {
  std::int64_t t = 0;
  double beta1_pow = 1.0;  // beta1^t
  double beta2_pow = 1.0;  // beta2^t
  friend bool operator==(const OptimizerStep&, const OptimizerStep&) = default;
};

// Everything but the tensors. Every rank file holds the same copy (plus its own rank number), so
// any one file describes the checkpoint and a file from another checkpoint is detected.
struct CheckpointMeta {
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  std::int64_t samples_seen = 0;  // data cursor: global samples consumed, independent of N
  int world_size = 1;
  std::string policy;  // "ddp", "zero1", ... as the trainer names it
  OptimizerStep optimizer;
  Signature signature;
  std::map<std::string, double> scalars;          // LR-schedule state and the like
  std::map<std::string, std::uint64_t> counters;  // RNG state: seed, stream counters
  std::map<std::string, std::string> labels;      // model preset, optimizer kind, ...
  friend bool operator==(const CheckpointMeta&, const CheckpointMeta&) = default;
};

// The slice of one logical (unsharded) tensor that a rank writes: elements
// [offset, offset + data.size()) of the tensor flattened in row-major order. A rank gives at most
// one slice per tensor; together the ranks' slices must cover every tensor exactly once (the
// reader refuses gaps and overlaps). Empty slices are skipped.
struct TensorSlice {
  std::string name;  // "params/0.weight/val", ".../m", ".../v"; never under "meta/"
  Shape global_shape;
  std::int64_t offset = 0;       // elements
  std::span<const float> data;   // host memory: copy device tensors to the host first
};

// "params/<param>/<kind>": the names the trainer uses for a parameter's value and Adam moments.
std::string param_tensor_name(std::string_view param, std::string_view kind);

// "step-00000120" (at least 8 digits).
std::string step_dir_name(std::int64_t step);

// Writes this rank's file <ckpt_dir>/.tmp-step-N/rank-<rank>.h5 (N = meta.step), creating the
// directories as needed (ranks race to create them; that is fine), and fsyncs it. The file is
// written as rank-<rank>.h5.part and renamed when durable, so commit_checkpoint never mistakes a
// half-written file for a finished one. HDF5 writes the metadata; the slices' bytes go in with
// pwrite at the offsets HDF5 allocated, outside HDF5's process-wide lock, so the ranks of one
// process write in parallel. Errors: Error for invalid slices (outside the tensor,
// twice the same name, a shape that disagrees with the signature), InputError when the
// directory cannot be written, LibraryError for a failed HDF5 call.
void write_rank_file(const std::filesystem::path& ckpt_dir, int rank, const CheckpointMeta& meta,
                     std::span<const TensorSlice> slices);

// Rank 0, after every rank's write_rank_file returned: checks that the world_size rank files are
// there, makes the directory durable, renames .tmp-step-N to step-N (atomically replacing an
// existing step-N), points `latest` at it (written to latest.tmp, fsynced, renamed, directory
// fsynced), then removes leftovers (other .tmp-step-* directories of crashed writes) and all but
// the keep_last newest committed checkpoints (keep_last <= 0 keeps all). Returns the committed
// directory. A missing rank file is an Error naming it and leaves `latest` untouched.
std::filesystem::path commit_checkpoint(const std::filesystem::path& ckpt_dir, std::int64_t step,
                                        int world_size, int keep_last);

// The checkpoint `latest` names in ckpt_dir, or nullopt when there is none yet (no `latest`
// file). A `latest` that names a missing directory is an InputError.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& ckpt_dir);

// What `--resume PATH` and `noeira inspect PATH` accept, turned into a step directory: a step
// directory itself, a checkpoint directory (its `latest` is followed) or the `latest` file.
// InputError for anything else, naming why (missing, a half-written .tmp-step-* directory, no
// rank files, a dangling `latest`).
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path);

// Committed step directories in ckpt_dir, oldest first.
std::vector<std::pair<std::int64_t, std::filesystem::path>> list_checkpoints(
    const std::filesystem::path& ckpt_dir);

// Removes every checkpoint in ckpt_dir: `latest` first (so that it never names a removed
// directory), then the step directories and the leftovers of crashed writes. Other files stay.
void discard_checkpoints(const std::filesystem::path& ckpt_dir);

// Removes the temporary directory of a step whose save failed (after every rank stopped writing
// it); nothing when there is none. Returns the directory removed, if any.
std::optional<std::filesystem::path> abandon_checkpoint(const std::filesystem::path& ckpt_dir, std::int64_t step);

namespace test_hooks {
// Test hook: called at each stage of the write and commit protocol ("rank_file_open",
// "slice_written", "rank_file_synced", "rank_file_renamed", "tmp_dir_synced", "step_dir_renamed",
// "latest_tmp_synced", "latest_renamed", "pruned"), so a test can kill the process there. Null by
// default; not for production use.
using CheckpointHook = void (*)(std::string_view stage);
void set_checkpoint_hook(CheckpointHook hook);
CheckpointHook checkpoint_hook();
}  // namespace test_hooks

}  // namespace noeira::io
