#include "train/run.hpp"

#include <cblas.h>
#include <omp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "core/bf16_activation.hpp"
#include "distributed/mpi_check.hpp"
#include "distributed/mpi_process_group.hpp"
#include "distributed/nccl_process_group.hpp"
#include "distributed/rank_agreement.hpp"
#include "distributed/rank_stream.hpp"
#include "distributed/sim_process_group.hpp"
#include "io/checkpoint_reader.hpp"
#include "io/params_file.hpp"
#include "core/scratch_arena.hpp"
#include "kernels/cpu/blas_core.hpp"
#include "kernels/cpu/gemm.hpp"
#include "train/model_description.hpp"
#include "train/presets.hpp"
#include "train/run_data.hpp"
#include "train/saved_model.hpp"
#include "train/weights_file.hpp"

namespace noeira {

namespace {

void write_config(const std::filesystem::path& file, const TrainConfig& cfg) {
  std::ofstream out(file);
  out << to_json(cfg).dump(2) << '\n';
  if (!out) throw InputError(detail::concat(file.string(), ": cannot write the configuration"));
}

dist::PolicyOptions policy_options(const TrainConfig& cfg) {
  dist::PolicyOptions o;
  o.bucket_elements =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(cfg.bucket_mb * 1024.0 * 1024.0 / 4.0));
  o.persist_below = cfg.zero3_persist_below;
  o.prefetch = !cfg.no_zero3_prefetch;
  o.reduce_dtype = parse_reduce_dtype(cfg.reduce_dtype);
  o.param_dtype = param_dtype_of(parse_precision(cfg.precision));
  o.grad_dtype = parse_grad_dtype(cfg.grad_dtype);
  return o;
}

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

// What rank 0 of a run writes besides the metrics: <out>/config.json now, <out>/model.h5 at the
// end. Created before any rank starts, so a bad --out fails before training.
struct RunFiles {
  std::filesystem::path out;
  std::optional<MetricsFile> metrics;
};

// The default output directory, runs/<model>-<data>-<time>, made by this run alone: mkdir(2)
// fails when the name exists, and the next suffix (-2, -3, ...) is tried, so two runs started in
// the same second never share one.
std::filesystem::path create_default_out_dir(const TrainConfig& cfg) {
  const std::filesystem::path base = default_out_dir(cfg);
  std::error_code ec;
  std::filesystem::create_directories(base.parent_path(), ec);
  if (ec) {
    throw InputError(detail::concat(base.parent_path().string(),
                                    ": cannot create the output directory (", ec.message(), ")"));
  }
  for (int n = 1;; ++n) {
    std::filesystem::path dir = base;
    if (n > 1) dir += detail::concat("-", n);
    if (::mkdir(dir.c_str(), 0777) == 0) return dir;
    if (errno != EEXIST || n == 1000) {
      throw InputError(detail::concat(dir.string(), ": cannot create the output directory (",
                                      std::strerror(errno), ")"));
    }
  }
}

RunFiles open_run_files(const TrainConfig& cfg) {
  RunFiles files;
  std::error_code ec;
  if (cfg.out.empty()) {
    files.out = create_default_out_dir(cfg);
  } else {
    files.out = cfg.out;
    std::filesystem::create_directories(files.out, ec);
  }
  if (ec) {
    throw InputError(detail::concat(files.out.string(), ": cannot create the output directory (",
                                    ec.message(), ")"));
  }
  write_config(files.out / "config.json", cfg);
  files.metrics.emplace(files.out / "metrics.jsonl", /*append=*/!cfg.resume.empty());
  return files;
}

// The checkpoint directory's lock for the life of the run (none without checkpoints), saying so
// when its file system cannot lock at all.
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

// One rank's whole run: build the model, hand its parameters to the sharding policy, make the
// replicas identical, train, and (rank 0) save the final parameters. `files` and `progress` are
// rank 0's (null elsewhere).
template <Module M, class Run>
TrainSummary train_rank(const TrainConfig& cfg, dist::ProcessGroup& group, const Run& run,
                        Progress* progress, RunFiles* files) {
  // The group's buffers decide where this rank computes (the NCCL group and a simulated world on
  // the GPU: cuda), and the group decides on which stream.
  const dist::RankStream stream(group, group.buffer_target());
  Context ctx = Context::for_target(group.buffer_target(), stream.get(),
                                    parse_precision(cfg.precision));
  ctx.seed = cfg.seed;
  // Under --precision bf16 the activations that only products read are held as bfloat16 bits:
  // the same numbers in half the bytes (core/bf16_activation.hpp), unless --fp32-activations.
  ctx.bf16_activations = !cfg.fp32_activations;
  // This rank's blocks share one block's buffers (a simulated rank is a thread of its own).
  ScratchArena scratch;
  if (cfg.checkpoint_activations) ctx.scratch = &scratch;
  M model(model_init<M>(cfg, ctx.target));
  // Weights to start from replace the initializer's before the policy takes the parameters.
  if (!cfg.init_from.empty()) {
    load_weights_file(cfg.init_from, cfg.model, cfg.names, dist::walk_units(model),
                      non_finite_policy(cfg));
  }
  dist::ShardingPolicy policy(dist::parse_policy(cfg.policy), dist::walk_units(model), group, ctx,
                              policy_options(cfg));
  // Identical seeds are not enough for identical replicas: rank 0's values win.
  policy.broadcast_initial_parameters();

  // Ranks other than 0 report nothing: their progress goes nowhere.
  std::ostream null_stream(nullptr);
  Progress quiet(null_stream, null_stream, cfg.log_format, false);
  const std::filesystem::path resume = cfg.resume.empty() ? std::filesystem::path() : resume_path(cfg);
  auto task = [&] {
    if constexpr (LanguageModel<M>) {
      return run.task(cfg, M::block);
    } else {
      return run.task(cfg);
    }
  }();
  const TrainSummary summary =
      train(model, ctx, cfg, task, progress != nullptr ? *progress : quiet,
            files != nullptr && files->metrics ? &*files->metrics : nullptr, policy, resume);
  if (summary.stop_signal != 0) return summary;  // to be resumed: no final parameters yet

  // Collective under ZeRO-3 (it gathers); rank 0 writes the file.
  const std::vector<float> values = policy.full_parameters();
  if (files != nullptr) {
    const std::filesystem::path params_file = files->out / "model.h5";
    auto save = [&] {
      const dist::WalkUnits walk = dist::walk_units(model);
      io::save_params(params_file, cfg.model, signature_of(walk), values,
                      saved_attributes(cfg, sizes_of<M>(static_cast<std::int64_t>(values.size()))),
                      non_finite_policy(cfg), buffer_signature(walk), buffer_values(walk));
    };
    if (!summary.save_failure.empty()) {
      // A checkpoint failed: what can still be written is, and the failure says what it was.
      TrainSummary failed = summary;
      try {
        save();
        failed.save_failure += detail::concat("; the parameters of step ", summary.steps,
                                              " are in ", params_file.string());
      } catch (const std::exception& e) {
        failed.save_failure += detail::concat("; model.h5 not written either: ", e.what());
      }
      return failed;
    }
    save();
    if (progress != nullptr) {
      progress->note(detail::concat("saved ", params_file.string(), "; metrics in ",
                                    files->metrics->path().string()));
    }
  }
  return summary;
}

}  // namespace

// The device a run asks for, checked before any data is loaded; TF32 set as asked.
Target run_target(const TrainConfig& cfg) {
  const Target target = parse_device(cfg.device);
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
void select_rank_device([[maybe_unused]] Target target) {
#ifdef NOEIRA_HAVE_CUDA
  if (target == Target::Cuda) (void)dist::select_local_device(MPI_COMM_WORLD);
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
  add("data", cfg.data);
  for (const auto& [key, value] : j.items()) {
    if (key == "model" || key == "data" || key == "threads") continue;
    add(key, value.is_string() ? value.get<std::string>() : value.dump());
  }
  add("resume", cfg.resume);
  return settings;
}

// The ranks of this run: the MPI processes, else the simulated ones (one without either).
int run_world(const TrainConfig& cfg, bool mpi) {
  if (!mpi) return std::max(1, cfg.sim_ranks);
  int size = 1;
  NOEIRA_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return size;
}

std::unique_ptr<dist::ProcessGroup> make_rank_group(Target target,
                                                    const dist::ProcessGroupOptions& options) {
  if (target == Target::Cpu) return dist::make_mpi_process_group(options);
#ifdef NOEIRA_HAVE_CUDA
  // The compute stream is the legacy default stream, which every Context here uses.
  return dist::make_nccl_process_group(options, /*compute_stream=*/nullptr, MPI_COMM_WORLD);
#else
  throw InputError("--device cuda: this noeira was built without CUDA");
#endif
}

}  // namespace

std::string default_out_dir(const TrainConfig& cfg) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return detail::concat("runs/", cfg.model, "-", cfg.data, "-", stamp);
}

TrainOutcome run_train(const TrainConfig& given) {
  TrainConfig cfg = given;
  validate(cfg);
  if (!is_text(cfg)) (void)parse_dataset_kind(cfg.data);
  // Resolve every name before the (slow) data load, so a typo fails at once.
  (void)optimizer_config(cfg);
  (void)parse_schedule_kind(cfg.schedule);
  (void)dist::parse_policy(cfg.policy);
  if (!cfg.init_from.empty() && !cfg.resume.empty()) {
    throw InputError("--init-from and --resume: a resumed run continues its own weights; give one");
  }
  if (!cfg.names.empty()) (void)kNameSchemeNames.parse(cfg.names);
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
  // Before anything that depends on the settings, collectives above all: ranks started with
  // other options would post collectives that do not match.
  if (mpi) dist::check_ranks_agree(MPI_COMM_WORLD, rank_settings(cfg));
  const int world = run_world(cfg, mpi);
  check_batch_covers_ranks(cfg.batch, world, static_cast<int>(cfg.accum));
  if (!cfg.checkpoint_dir.empty()) install_stop_handlers();
  dist::ProcessGroupOptions group_options;
  group_options.timeout = dist::Milliseconds(static_cast<std::int64_t>(cfg.watchdog_timeout * 1000.0));

  return with_preset(cfg.model, [&]<class M>(std::type_identity<M>) {
    check_preset_suits_data<M>(cfg);
    if (cfg.batchnorm == "local" || cfg.checkpoint_activations || cfg.fp32_activations) {
      M probe(model_init<M>(cfg, Target::Cpu));
      if (cfg.batchnorm == "local" && dist::walk_units(probe).buffers.empty()) {
        throw InputError(detail::concat("--batchnorm local: model '", cfg.model,
                                        "' has no batch normalization"));
      }
      if (cfg.checkpoint_activations && checkpoint_sites(probe) == 0) {
        throw InputError(detail::concat("--checkpoint-activations: model '", cfg.model,
                                        "' has no blocks to checkpoint (the gpt, vit and resnet "
                                        "models have)"));
      }
      if (cfg.fp32_activations && bf16_activation_sites(probe) == 0) {
        throw InputError(detail::concat("--fp32-activations: model '", cfg.model,
                                        "' holds no activation in bf16 (the gpt and vit models "
                                        "do)"));
      }
    }
    if (!cfg.init_from.empty()) {
      // A file that does not fit the model fails now, not after the (slow) data load.
      M probe(model_init<M>(cfg, Target::Cpu));
      load_weights_file(cfg.init_from, cfg.model, cfg.names, dist::walk_units(probe),
                        non_finite_policy(cfg));
    }
    if (mpi) select_rank_device(target);
    const auto run = [&] {
      if constexpr (LanguageModel<M>) {
        TextRun text = load_text_run(cfg, target, M::vocab);
        cfg.vocabulary = text.tokenizer.to_text();
        return text;
      } else {
        return load_image_run(cfg, target, M::in_dim);
      }
    }();

    // The same options can still read other data: another file at the same path on another node.
    if (mpi) {
      char hash[24];
      std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(run.fingerprint));
      const dist::Setting data{"the data",
                               detail::concat("hash ", hash, " of ", run.describe(cfg))};
      dist::check_ranks_agree(MPI_COMM_WORLD, std::span(&data, 1));
    }

    TrainOutcome outcome;
    outcome.out_dir = cfg.out;  // the default one once rank 0 has created it
    // mpirun hands ranks a pseudo-terminal even when its own output goes to a log file: no bar
    // under MPI, so job logs stay plain lines.
    Progress progress(std::cout, std::cerr, cfg.log_format, stdout_is_terminal() && !mpi);
    outcome.parameters = [&] {
      M probe(model_init<M>(cfg, Target::Cpu));
      return parameter_count(probe);
    }();

    const int all_threads = cfg.threads > 0 ? cfg.threads : omp_get_num_procs();
    // nodes: the group's (ProcessGroup::nodes()), empty on one.
    auto header = [&](int world, std::string_view backend, const std::string& nodes,
                      int threads) {
      progress.note(detail::concat("noeira train: model ", cfg.model, " (", outcome.parameters,
                                   " parameters), ", run.describe(cfg)));
      progress.note(detail::concat("  ", world, " rank", world == 1 ? "" : "s", " (", backend,
                                   nodes.empty() ? "" : ", ", nodes, "), device ", cfg.device, cfg.allow_tf32 ? " (tf32)" : "",
                                   cfg.precision == "bf16" ? " (bf16 products)" : "",
                                   ", policy ", cfg.policy,
                                   cfg.grad_dtype == "bf16"     ? " (bf16 gradients and reductions)"
                                   : cfg.reduce_dtype == "bf16" ? " (bf16 reductions)"
                                                                : "",
                                   ", threads per rank ", threads,
                                   // MPI: a process per rank; else every rank in this one
                                   oversubscription(mpi ? threads : world * threads),
                                   target == Target::Cpu ? ", products " : "",
                                   target == Target::Cpu ? cpu::products_library() : "",
                                   target == Target::Cpu ? ", OpenBLAS kernels " : "",
                                   target == Target::Cpu ? cpu::blas_core() : std::string()));
      progress.note(detail::concat(
          "  optimizer ", cfg.optimizer, " lr ", cfg.lr, " (", cfg.schedule, "), batch ",
          cfg.batch, is_text(cfg) ? ", steps " : ", epochs ", is_text(cfg) ? cfg.steps : cfg.epochs,
          ", seed ", cfg.seed, ", output ", outcome.out_dir));
    };

    if (mpi) {
      // One rank per process; main() owns MPI initialization (dist::MpiRuntime). --threads is
      // per rank, as main() set it.
      const std::unique_ptr<dist::ProcessGroup> group = make_rank_group(target, group_options);
      std::optional<RunFiles> files;
      // Rank 0 alone locks the checkpoint directory (io/checkpoint_lock.hpp says why); when it
      // cannot, its error aborts the job before any rank writes.
      const std::optional<io::CheckpointDirLock> lock =
          group->rank() == 0 ? claim_for_run(cfg, progress) : std::nullopt;
      if (group->rank() == 0) {
        files = open_run_files(cfg);
        outcome.out_dir = files->out.string();
        header(group->size(), group->backend(), group->nodes(), omp_get_max_threads());
      }
      const TrainSummary summary =
          train_rank<M>(cfg, *group, run, files ? &progress : nullptr, files ? &*files : nullptr);
      // Every rank returns its summary: the stop signal and the checkpoint are valid on all,
      // so every process of a stopped job exits "to be resumed".
      outcome.summary = summary;
      outcome.rank = group->rank();
      return outcome;
    }

    // N simulated ranks (threads) of this process, or one: the same policy code either way.
    const int threads = std::max(1, all_threads / world);
    const std::optional<io::CheckpointDirLock> lock = claim_for_run(cfg, progress);
    RunFiles files = open_run_files(cfg);
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
          const TrainSummary summary = train_rank<M>(cfg, group, run, zero ? &progress : nullptr,
                                                     zero ? &files : nullptr);
          if (zero) outcome.summary = summary;
        },
        group_options, target, cfg.sim_ranks_per_node);
    omp_set_num_threads(caller_threads);
    return outcome;
  });
}

}  // namespace noeira
