#include "train/run.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "core/hash.hpp"
#include "distributed/mpi_check.hpp"
#include "distributed/mpi_process_group.hpp"
#include "distributed/nccl_process_group.hpp"
#include "distributed/rank_agreement.hpp"
#include "distributed/sim_process_group.hpp"
#include "io/checkpoint_reader.hpp"
#include "kernels/cpu/blas_core.hpp"
#include "kernels/cpu/gemm.hpp"
#include "train/model_catalogue.hpp"
#include "train/run_launch.hpp"
#include "train/run_data.hpp"
#include "train/run_files.hpp"
#include "train/saved_model.hpp"
#include "train/tokenizer.hpp"

namespace noeira {

dist::PolicyOptions policy_options(const TrainConfig& cfg) {
  dist::PolicyOptions o;
  o.bucket_elements =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(cfg.bucket_mb * 1024.0 * 1024.0 / 4.0));
  o.persist_below = cfg.zero3_persist_below;
  o.prefetch = !cfg.no_zero3_prefetch;
  o.reduce_dtype = cfg.reduce_dtype;
  o.param_dtype = param_dtype_of(cfg.precision);
  o.grad_dtype = cfg.grad_dtype;
  return o;
}

namespace {

// A note for the header when the process runs more threads than the CPUs it may run on, which
// is how `mpirun -np 1 noeira train --threads 2` starts: Open MPI binds a rank to one core unless
// told otherwise, and then both threads share it at half the speed.
std::string oversubscription(int process_threads) {
  const int cpus = omp_get_num_procs();  // the CPUs of this process's affinity mask
  if (process_threads <= cpus) return {};
  return detail::concat(" (but this process may run on ", cpus, " CPU", cpus == 1 ? "" : "s",
                        ": its threads share cores; under mpirun, --bind-to none or "
                        "--map-by slot:PE=<threads> gives each rank its cores)");
}

// The rank layout of a run, for its header.
struct RankLayout {
  int ranks = 1;
  std::string_view backend;  // "mpi", "nccl", "simulated", "single process"
  std::string nodes;         // the group's (ProcessGroup::nodes()), empty on one
  int threads = 1;           // per rank
  bool mpi = false;
  Target target = Target::Cpu;
};

// The header's three lines: model and data; ranks, device, policy and threads; optimizer,
// schedule, batch, length, seed and output.
void print_run_header(Progress& progress, const TrainConfig& cfg, const LoadedRun& run,
                      const RankLayout& r, const std::string& out_dir) {
  const bool cpu = r.target == Target::Cpu;
  progress.note(detail::concat("noeira train: model ", cfg.model, " (", run.parameters,
                               " parameters), ", run.described));
  progress.note(detail::concat(
      "  ", r.ranks, " rank", r.ranks == 1 ? "" : "s", " (", r.backend, r.nodes.empty() ? "" : ", ",
      r.nodes, "), device ", kDeviceNames.name_of(cfg.device), cfg.allow_tf32 ? " (tf32)" : "",
      cfg.precision == Precision::Bf16 ? " (bf16 products)" : "", ", policy ",
      dist::to_string(cfg.policy),
      cfg.grad_dtype == DType::BF16     ? " (bf16 gradients and reductions)"
      : cfg.reduce_dtype == DType::BF16 ? " (bf16 reductions)"
                                        : "",
      ", threads per rank ", r.threads,
      // MPI: a process per rank; else every rank in this one
      oversubscription(r.mpi ? r.threads : r.ranks * r.threads), cpu ? ", products " : "",
      cpu ? cpu::products_library() : "", cpu ? ", OpenBLAS kernels " : "",
      cpu ? cpu::blas_core() : std::string()));
  progress.note(detail::concat(
      "  optimizer ", to_string(cfg.optimizer), " lr ", cfg.lr, " (", to_string(cfg.schedule),
      "), batch ", cfg.batch,
      is_text(cfg) ? ", steps " : ", epochs ", is_text(cfg) ? cfg.steps : cfg.epochs, ", seed ",
      cfg.seed, ", output ", out_dir));
  // Not refused (it trains correctly), but not what ZeRO-3 is for: no rank holds less.
  if (cfg.policy == dist::Policy::Zero3 && r.ranks > 1 && run.units == 1) {
    progress.note(detail::concat(
        "note: model '", cfg.model, "' is one unit, so ZeRO-3 gathers all of its parameters at "
        "once on every rank (a Sequential's children are its units, or mark them with Unit<>)"));
  }
}

// What rank 0 holds for the life of a run: the checkpoint directory's lock (none without
// checkpoints), the run's files, and the directories it made, removed again if it is refused
// before its records begin (train/run_files.hpp).
struct RunClaim {
  NewDirectories checkpoint_dirs;
  std::optional<io::CheckpointDirLock> lock;
  NewDirectories out_dirs;
  RunFiles files;
};

// The checkpoint directory's lock, saying so when its file system cannot lock at all.
std::optional<io::CheckpointDirLock> claim_for_run(const TrainConfig& cfg, Progress& progress) {
  if (cfg.checkpoint_dir.empty()) return std::nullopt;
  std::optional<io::CheckpointDirLock> lock(claim_checkpoint_dir(cfg));
  if (!lock->held()) {
    progress.note(detail::concat("note: --checkpoint-dir ", cfg.checkpoint_dir,
                                 ": its file system has no flock, so nothing keeps another run "
                                 "out of it"));
  }
  return lock;
}

// Claims the checkpoint directory, then the output directory; when the records begin, the
// checkpoints that --overwrite-checkpoints replaces are discarded and the new directories kept.
std::unique_ptr<RunClaim> claim_run(const TrainConfig& cfg, Progress& progress) {
  auto claim = std::make_unique<RunClaim>();
  if (!cfg.checkpoint_dir.empty()) {
    claim->checkpoint_dirs = NewDirectories(cfg.checkpoint_dir, {io::kCheckpointLockFile});
  }
  if (auto lock = claim_for_run(cfg, progress)) claim->lock.emplace(std::move(*lock));
  RunClaim* held = claim.get();
  claim->files = claim_run_files(cfg, claim->out_dirs, [&cfg, held] {
    discard_replaced_checkpoints(cfg);
    held->checkpoint_dirs.keep();
    held->out_dirs.keep();
  });
  return claim;
}

}  // namespace

// The device a run asks for, checked before any data is loaded; TF32 set as asked.
Target run_target(const TrainConfig& cfg) {
  const Target target = cfg.device;
  if (target == Target::Cuda) {
    if (const std::string why = cuda_unavailable_reason(); !why.empty()) {
      throw InputError("--device cuda: " + why);
    }
  }
  if (cfg.allow_tf32 && target != Target::Cuda) {
    throw InputError("--allow-tf32 applies to --device cuda only");
  }
  set_allow_tf32(cfg.allow_tf32);
  return target;
}

namespace {

// Under MPI with --device cuda: this rank's GPU (node-local rank modulo the visible devices), made
// current before anything is uploaded, so the data and the NCCL group share it. Collective.
void select_rank_device([[maybe_unused]] Target target, [[maybe_unused]] MPI_Comm comm) {
#ifdef NOEIRA_HAVE_CUDA
  if (target == Target::Cuda) (void)dist::select_local_device(comm);
#endif
}

// What every rank of a job must agree on: the resolved configuration under the command line's
// option names, model and data first (they decide which other options apply), and --resume.
// Not --threads: it is per rank by design (nodes of different sizes).
std::vector<dist::Setting> rank_settings(const TrainConfig& cfg) {
  const nlohmann::json j = to_json(cfg);
  std::vector<dist::Setting> settings;
  auto add = [&](const std::string& key, const std::string& value) {
    settings.push_back({"--" + key, value});
  };
  add("model", cfg.model);
  add("data", std::string(to_string(cfg.data)));
  for (const auto& [key, value] : j.items()) {
    if (key == "model" || key == "data" || key == "threads") continue;
    add(key, value.is_string() ? value.get<std::string>() : value.dump());
  }
  add("resume", cfg.resume);
  return settings;
}


std::unique_ptr<dist::ProcessGroup> make_rank_group(Target target,
                                                    const dist::ProcessGroupOptions& options,
                                                    MPI_Comm comm) {
  if (target == Target::Cpu) return dist::make_mpi_process_group(options, comm);
#ifdef NOEIRA_HAVE_CUDA
  // The compute stream is the legacy default stream, which every Context here uses.
  return dist::make_nccl_process_group(options, /*compute_stream=*/nullptr, comm);
#else
  throw InputError("--device cuda: this noeira was built without CUDA");
#endif
}

// The vocabulary of the language model --init-from names, against this run's: the same token
// ids for other tokens would give every embedding row another meaning without a word. Refused
// unless --new-vocabulary says that is meant; a file that stores none (PyTorch's) cannot be
// checked.
}  // namespace

void check_init_vocabulary(const TrainConfig& cfg) {
  TrainConfig source = cfg;
  source.params = cfg.init_from;
  const std::string stored = SavedModel::open(source).vocabulary();
  if (stored.empty() || stored == cfg.vocabulary || cfg.new_vocabulary) return;
  auto described = [](const std::string& vocabulary) {
    const Tokenizer t = Tokenizer::from_text(vocabulary);
    return detail::concat(to_string(t.kind()), ", ", t.vocab_size(), " ids");
  };
  throw InputError(detail::concat(
      "--init-from ", cfg.init_from, ": trained on another vocabulary (", described(stored),
      ") than this run's corpus gives (", described(cfg.vocabulary),
      "): its embedding rows would stand for other tokens; pass --new-vocabulary to fine-tune "
      "on this text anyway"));
}

namespace {

// The ranks of a run over `comm`: its processes, or with MPI_COMM_NULL the simulated ranks (one
// without them).
int world_of(const TrainConfig& cfg, MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return std::max(1, cfg.sim_ranks);
  int size = 1;
  NOEIRA_MPI_CHECK(MPI_Comm_size(comm, &size));
  return size;
}

// The communicator of a run launched as a program: the world under an MPI launcher.
MPI_Comm launched_comm() {
  return dist::MpiRuntime::launched_by_mpi() ? MPI_COMM_WORLD : MPI_COMM_NULL;
}

}  // namespace

int run_world(const TrainConfig& cfg) { return world_of(cfg, launched_comm()); }

std::string default_out_dir(const TrainConfig& cfg) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return detail::concat("runs/", cfg.model, "-", to_string(cfg.data), "-", stamp);
}

Target check_train_config(const TrainConfig& cfg) {
  validate(cfg);
  // Resolve every name before the (slow) data load, so a typo fails at once.
  (void)model_catalogue().find(cfg.model);
  (void)optimizer_config(cfg);
  if (!cfg.init_from.empty() && !cfg.resume.empty()) {
    throw InputError("--init-from and --resume: a resumed run continues its own weights; give one");
  }
  const Target target = run_target(cfg);
  const bool mpi = dist::MpiRuntime::launched_by_mpi();
  if (mpi && cfg.sim_ranks > 0) {
    throw InputError(detail::concat("--sim-ranks ", cfg.sim_ranks,
                                    " under an MPI launcher: the ranks are the MPI processes; "
                                    "drop --sim-ranks or run without mpirun"));
  }
  if (cfg.sim_ranks_per_node > 0 && (mpi || cfg.sim_ranks_per_node > cfg.sim_ranks)) {
    throw InputError(detail::concat(
        "--sim-ranks-per-node ", cfg.sim_ranks_per_node,
        mpi ? " under an MPI launcher: the nodes are those the processes run on"
            : detail::concat(" needs --sim-ranks of at least as many ranks (got --sim-ranks ",
                             cfg.sim_ranks, ")")));
  }
  return target;
}

namespace {

// A run over `comm` (MPI_COMM_NULL: this process's simulated ranks, or one).
TrainOutcome train_over(const TrainConfig& given, MPI_Comm comm, const TrainCallbacks& callbacks) {
  TrainConfig cfg = given;
  const Target target = check_train_config(cfg);
  const bool mpi = comm != MPI_COMM_NULL;
  // Before anything that depends on the settings, collectives above all: ranks started with
  // other options would post collectives that do not match.
  if (mpi) dist::check_ranks_agree(comm, rank_settings(cfg));
  const int world = world_of(cfg, comm);
  check_batch_covers_ranks(cfg.batch, world, static_cast<int>(cfg.accum));
  if (!cfg.checkpoint_dir.empty()) install_stop_handlers();
  dist::ProcessGroupOptions group_options;
  group_options.timeout =
      dist::Milliseconds(static_cast<std::int64_t>(cfg.watchdog_timeout * 1000.0));
  const TrainLaunch launch{target, comm, world, group_options, &callbacks};
  return model_catalogue().find(cfg.model).train(cfg, launch);
}

}  // namespace

void require_callers_mpi(std::string_view who) {
  int initialized = 0, finalized = 0;
  NOEIRA_MPI_CHECK(MPI_Initialized(&initialized));
  NOEIRA_MPI_CHECK(MPI_Finalized(&finalized));
  if (!initialized || finalized) {
    throw InputError(detail::concat(who, ": MPI is not initialized (the calling program "
                                         "initializes and finalizes it)"));
  }
}

namespace {

// A communicator of the caller's, duplicated for the run: noeira's messages never match the
// caller's own, and the duplicate is freed when the run ends, however it ends.
class RunCommunicator {
 public:
  explicit RunCommunicator(MPI_Comm given) {
    require_callers_mpi("run_train over a communicator");
    if (given == MPI_COMM_NULL) {
      throw InputError("run_train over a communicator: it is MPI_COMM_NULL (this process is in "
                       "no group that trains)");
    }
    NOEIRA_MPI_CHECK(MPI_Comm_dup(given, &comm_));
  }
  ~RunCommunicator() { MPI_Comm_free(&comm_); }
  RunCommunicator(const RunCommunicator&) = delete;
  RunCommunicator& operator=(const RunCommunicator&) = delete;
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace

TrainOutcome run_train(const TrainConfig& config, const TrainCallbacks& callbacks) {
  return train_over(config, launched_comm(), callbacks);
}

TrainOutcome run_train(const TrainConfig& config, MPI_Comm comm,
                       const TrainCallbacks& callbacks) {
  if (config.sim_ranks > 0) {
    throw InputError(detail::concat("--sim-ranks ", config.sim_ranks,
                                    " with a communicator: the ranks are the communicator's"));
  }
  const RunCommunicator run_comm(comm);
  return train_over(config, run_comm.get(), callbacks);
}

void prepare_every_rank(const TrainLaunch& launch, const std::function<void()>& prepare) {
  if (launch.mpi()) {
    select_rank_device(launch.target, launch.comm);  // collective
    dist::agree_on_success(launch.comm, prepare);
  } else {
    prepare();
  }
}

TrainOutcome run_ranks(const TrainConfig& cfg, const TrainLaunch& launch, const LoadedRun& run,
                       const RankBody& body) {
  const bool mpi = launch.mpi();
  const int world = launch.world;
  const Target target = launch.target;
  // The same options can still read other data: another file at the same path on another node.
  if (mpi) {
    const dist::Setting data{"the data", detail::concat("hash ", hex64(run.fingerprint), " of ",
                                                       run.described)};
    dist::check_ranks_agree(launch.comm, std::span(&data, 1));
  }

  TrainOutcome outcome;
  outcome.out_dir = cfg.out;  // the default one once rank 0 has created it
  // mpirun hands ranks a pseudo-terminal even when its own output goes to a log file: no bar
  // under MPI, so job logs stay plain lines.
  Progress progress(std::cout, std::cerr, cfg.log_format, stdout_is_terminal() && !mpi);
  if (launch.callbacks != nullptr) progress.observe(*launch.callbacks);
  // After the run (every rank done with it): what a callback threw, on rank 0.
  auto callbacks_done = [&](TrainOutcome done) {
    if (!progress.callback_failure().empty()) {
      throw Error(detail::concat("a training callback threw: ", progress.callback_failure(),
                                 " (the run finished: ", done.out_dir, ")"));
    }
    return done;
  };
  outcome.parameters = run.parameters;

  const int all_threads = cfg.threads > 0 ? cfg.threads : omp_get_num_procs();
  auto header = [&](int ranks, std::string_view backend, const std::string& nodes, int threads) {
    print_run_header(progress, cfg, run, {ranks, backend, nodes, threads, mpi, target},
                     outcome.out_dir);
  };

  if (mpi) {
    // One rank per process; main() owns MPI initialization (dist::MpiRuntime). --threads is
    // per rank, as main() set it.
    const std::unique_ptr<dist::ProcessGroup> group =
        make_rank_group(target, launch.group_options, launch.comm);
    // Rank 0 alone locks the checkpoint directory (io/checkpoint_lock.hpp says why) and owns
    // the output directory; its refusal (another run's directory) ends every rank alike before
    // any rank writes, said once.
    std::unique_ptr<RunClaim> claim;
    dist::agree_on_success(launch.comm, [&] {
      if (group->rank() == 0) claim = claim_run(cfg, progress);
    });
    if (group->rank() == 0) {
      outcome.out_dir = claim->files.out.string();
      header(group->size(), group->backend(), group->nodes(), omp_get_max_threads());
    }
    RunFiles* files = claim ? &claim->files : nullptr;
    const TrainSummary summary = body(*group, files ? &progress : nullptr, files);
    // Every rank returns its summary: the stop signal and the checkpoint are valid on all,
    // so every process of a stopped job exits "to be resumed".
    outcome.summary = summary;
    outcome.rank = group->rank();
    return callbacks_done(outcome);
  }

  // N simulated ranks (threads) of this process, or one: the same policy code either way.
  const int threads = std::max(1, all_threads / world);
  const std::unique_ptr<RunClaim> claim = claim_run(cfg, progress);
  RunFiles& files = claim->files;
  outcome.out_dir = files.out.string();
  header(world, cfg.sim_ranks > 0 ? "simulated" : "single process",
         dist::simulated_nodes(world, cfg.sim_ranks_per_node).several_nodes(), threads);
  // The OpenMP build of OpenBLAS follows each calling thread's OpenMP thread count; setting
  // its global count once here keeps the rank threads from resetting it against each other.
  openblas_set_num_threads(threads);
  // Rank 0 runs on this thread (dist::run_simulated), which sets its share of the cores: the
  // thread's own count is put back after the run.
  const int caller_threads = omp_get_max_threads();
  dist::run_simulated(
      world,
      [&](dist::ProcessGroup& group) {
        omp_set_num_threads(threads);  // per thread: each rank gets its share of the cores
        const bool zero = group.rank() == 0;
        const TrainSummary summary =
            body(group, zero ? &progress : nullptr, zero ? &files : nullptr);
        if (zero) outcome.summary = summary;
      },
      launch.group_options, target, cfg.sim_ranks_per_node);
  omp_set_num_threads(caller_threads);
  return callbacks_done(outcome);
}

}  // namespace noeira
