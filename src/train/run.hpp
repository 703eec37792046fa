#pragma once
// The subcommands' bodies, behind plain functions: the model's name is resolved in the model
// catalogue (train/model_catalogue.hpp) to the entry compiled for its type, so the command line
// never sees a template.
#include <cstdint>
#include <string_view>

#include <mpi.h>

#include "train/config.hpp"
#include "train/trainer.hpp"

namespace noeira {

struct TrainOutcome {
  TrainSummary summary;
  std::int64_t parameters = 0;
  std::string out_dir;
  int rank = 0;  // this process's rank (MPI); only rank 0's summary holds the records
};

// Loads the data, trains, writes <out>/config.json, <out>/metrics.jsonl and <out>/model.h5.
// A run stopped by a signal (summary.stop_signal != 0) has written a checkpoint but no model.h5;
// one whose checkpoint failed (summary.save_failure) has written model.h5 where it could. Without
// --out, the output directory is a new one (TrainOutcome::out_dir).
// `callbacks`: rank 0's view of the records as they are made (train/progress.hpp).
TrainOutcome run_train(const TrainConfig& config, const TrainCallbacks& callbacks = {});

// The same run over the ranks of `comm`, a communicator of the calling program's (an MPI
// simulation that gives noeira some of its ranks; docs/library.md). Every rank of comm calls it
// together, with the same configuration. MPI must be initialized by the caller, who finalizes it:
// noeira does neither. The run's collectives are on a duplicate of comm, freed at the end, and
// touch no rank outside it; the caller must not wait on comm's ranks meanwhile. Not with
// --sim-ranks. A refusal (one that every rank finds) is thrown on every rank alike.
TrainOutcome run_train(const TrainConfig& config, MPI_Comm comm,
                       const TrainCallbacks& callbacks = {});

// Throws an InputError naming `who` unless the calling program's MPI is initialized and not yet
// finalized (a run or trainer over a communicator of the caller's).
void require_callers_mpi(std::string_view who);

// What run_train checks first, before anything is loaded: every option against the others, the
// names (preset, data set, optimizer, policy...), the device (run_target, returned) and the
// launch. No collective: under mpirun main() runs it on every rank alike, to say a refusal once
// (dist::agree_on_success).
Target check_train_config(const TrainConfig& config);

// The ranks of a run: the MPI processes when a launcher started this process (MPI initialized),
// else the simulated ones (one without either).
int run_world(const TrainConfig& config);

// Loads <config.params> (or the checkpoint config.eval_checkpoint) into the preset (config.model,
// or the one the file names when empty) and evaluates it on its task's held-out data: the test
// split of images, or the validation windows of the text corpus (mean loss per token).
EvalResult run_eval(const TrainConfig& config);

// What the output directory is named after when --out is not given:
// runs/<model>-<data>-<YYYYmmdd-HHMMSS>, with -2, -3, ... when a run already has that name.
std::string default_out_dir(const TrainConfig& config);

// The device a run asks for (--device), checked before any data is loaded (no GPU, a build
// without CUDA, --allow-tf32 on the CPU are one-line errors); sets TF32 as asked.
Target run_target(const TrainConfig& config);

}  // namespace noeira
