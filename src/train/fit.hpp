#pragma once
// A trainer that keeps its model between calls, for a program that trains in pieces of its own:
// fit some epochs, evaluate, decide, fit more, save the state, load another.
//
// The state — parameters, buffers, optimizer state, position in the data order — lives in the
// trainer's checkpoint directory, not in a process's memory: each fit resumes the last checkpoint
// exactly (any world size, any policy, the guarantee of --resume) and ends by writing the next.
// So fit(1) then fit(2) trains the very numbers one run of 3 epochs does, and the state survives
// the process (a job killed between fits loses nothing) and needs no memory between calls. The
// price: each fit loads the data and builds the model again (docs/library.md, "A trainer that
// keeps its model").
#include <cstdint>
#include <filesystem>

#include <mpi.h>

#include "train/config.hpp"
#include "train/progress.hpp"
#include "train/run.hpp"

namespace noeira {

class Trainer {
 public:
  // The run's options, as run_train takes them. Without a checkpoint directory the trainer keeps
  // its state in <out>/checkpoints; without --out, <out> is a new runs/<model>-<data>-<time>,
  // the same one for every fit. options.resume: a state to start from (a checkpoint, or
  // `latest` of the checkpoint directory). One process (options.sim_ranks simulated ranks, or
  // one), or the MPI processes of a launcher (MPI_COMM_WORLD, which the program initializes).
  explicit Trainer(TrainConfig options, TrainCallbacks callbacks = {});
  // Over the ranks of a communicator of the caller's, as run_train(config, comm): every rank of
  // comm makes the same calls on its trainer in the same order.
  Trainer(TrainConfig options, MPI_Comm comm, TrainCallbacks callbacks = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains `periods` more epochs (a language model: evaluation periods of eval_every steps) from
  // the current state, a period interrupted by a stop counting as one. The schedule spans
  // options.epochs (steps); a fit past them extends its span to where the fit ends. A callback's
  // should_stop ends it early (summary.stopped_early), a stop signal too (summary.stop_signal);
  // the state is then where it stopped. Returns what run_train returns.
  TrainOutcome fit(std::int64_t periods);
  // The current state on the held-out split, as `noeira eval` of its checkpoint.
  EvalResult evaluate() const;
  // Writes the current state to `dir` as a checkpoint of its own, which load() and --resume
  // take (on another number of ranks, under another policy). `dir` must not exist or be empty.
  void save(const std::filesystem::path& dir) const;
  // Makes the checkpoint at `path` (a step directory, a checkpoint directory or its `latest`)
  // the current state: the next fit continues it, evaluate() evaluates it. Its model must be
  // this trainer's; the data, batch and seed are checked by the next fit.
  void load(const std::filesystem::path& path);

  // The checkpoint that holds the current state; empty before the first fit or load.
  const std::filesystem::path& state() const { return state_; }
  // The options as the trainer completed them (out, checkpoint_dir).
  const TrainConfig& options() const { return cfg_; }

 private:
  TrainConfig cfg_;
  TrainCallbacks callbacks_;
  MPI_Comm comm_ = MPI_COMM_NULL;  // the trainer's duplicate; null: one process
  std::filesystem::path state_;
  // Whether the checkpoint directory holds checkpoints this trainer wrote (a load from elsewhere
  // then replaces them at the next fit).
  bool wrote_checkpoints_ = false;
};

}  // namespace noeira
