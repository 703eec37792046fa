#pragma once
// The part of `noeira train` that no model type changes, for train/train_model.hpp: how the run
// was launched, the checks and loads every rank makes alike, and the ranks themselves (MPI
// processes or simulated threads) with rank 0's output directory, lock and progress. Defined in
// run.cpp, compiled once.
#include <cstdint>
#include <functional>
#include <string>

#include <mpi.h>

#include "distributed/policy.hpp"
#include "distributed/process_group.hpp"
#include "train/config.hpp"
#include "train/progress.hpp"
#include "train/run.hpp"
#include "train/run_files.hpp"

namespace noeira {

// How run_train found the run launched, after its checks.
struct TrainLaunch {
  Target target = Target::Cpu;
  // The ranks' communicator, one rank per MPI process; MPI_COMM_NULL: `world` ranks of this
  // process.
  MPI_Comm comm = MPI_COMM_NULL;
  int world = 1;
  dist::ProcessGroupOptions group_options;
  // Rank 0's callbacks (train/progress.hpp); null: none.
  const TrainCallbacks* callbacks = nullptr;

  bool mpi() const { return comm != MPI_COMM_NULL; }
};

// Runs `prepare` (the model's checks, the data load) on every rank: under MPI after each rank
// has chosen its device, with a refusal said once (dist::agree_on_success).
void prepare_every_rank(const TrainLaunch& launch, const std::function<void()>& prepare);

// What the loaded data and the model tell the ranks and the run header.
struct LoadedRun {
  std::uint64_t fingerprint = 0;  // hash of the data: the ranks of a job must agree on it
  std::string described;          // the data's part of the header line
  std::int64_t parameters = 0;
  std::size_t units = 0;  // the model's units (distributed/units.hpp): what a policy shards by
};

// One rank's training; `progress` and `files` are rank 0's, null elsewhere.
using RankBody =
    std::function<TrainSummary(dist::ProcessGroup& group, Progress* progress, RunFiles* files)>;

// Checks that the ranks read the same data, claims the run's directories (rank 0), prints the
// header and runs `body` on every rank of the launch.
TrainOutcome run_ranks(const TrainConfig& cfg, const TrainLaunch& launch, const LoadedRun& loaded,
                       const RankBody& body);

// The sharding policy's options from the configuration.
dist::PolicyOptions policy_options(const TrainConfig& cfg);

// The vocabulary of the language model --init-from names against this run's.
void check_init_vocabulary(const TrainConfig& cfg);

}  // namespace noeira
