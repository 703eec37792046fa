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

#include "core/bf16_activation.hpp"
#include "core/hash.hpp"
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
#include "train/run_files.hpp"
#include "train/saved_model.hpp"
#include "train/tokenizer.hpp"
#include "train/weights_file.hpp"

namespace noeira {

namespace {

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

// What the preset alone can refuse of the options, and weights to start from that do not fit it:
// before the (slow) data load.
template <Module M>
void check_preset_options(const TrainConfig& cfg) {
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
    // A file that does not fit the model fails now, not after the (slow) data load; a
    // safetensors file's table of contents before the model is even built (a few bytes naming
    // gpt2-124m must not cost its memory first).
    if (io::is_safetensors_path(cfg.init_from)) {
      check_weights_before_building(io::SafetensorsFile::open(cfg.init_from), cfg.model,
                                    cfg.names);
    }
    M probe(model_init<M>(cfg, Target::Cpu));
    load_weights_file(cfg.init_from, cfg.model, cfg.names, dist::walk_units(probe),
                      non_finite_policy(cfg));
  }
}

// The vocabulary of the language model --init-from names, against this run's: the same token
// ids for other tokens would give every embedding row another meaning without a word. Refused
// unless --new-vocabulary says that is meant; a file that stores none (PyTorch's) cannot be
// checked.
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

}  // namespace

int run_world(const TrainConfig& cfg) {
  if (!dist::MpiRuntime::launched_by_mpi()) return std::max(1, cfg.sim_ranks);
  int size = 1;
  NOEIRA_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return size;
}

std::string default_out_dir(const TrainConfig& cfg) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return detail::concat("runs/", cfg.model, "-", cfg.data, "-", stamp);
}

Target check_train_config(const TrainConfig& cfg) {
  validate(cfg);
  if (!is_text(cfg)) (void)parse_dataset_kind(cfg.data);
  // Resolve every name before the (slow) data load, so a typo fails at once.
  with_preset(cfg.model, []<class M>(std::type_identity<M>) {});
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
  return target;
}

TrainOutcome run_train(const TrainConfig& given) {
  TrainConfig cfg = given;
  const Target target = check_train_config(cfg);
  const bool mpi = dist::MpiRuntime::launched_by_mpi();
  // Before anything that depends on the settings, collectives above all: ranks started with
  // other options would post collectives that do not match.
  if (mpi) dist::check_ranks_agree(MPI_COMM_WORLD, rank_settings(cfg));
  const int world = run_world(cfg);
  check_batch_covers_ranks(cfg.batch, world, static_cast<int>(cfg.accum));
  if (!cfg.checkpoint_dir.empty()) install_stop_handlers();
  dist::ProcessGroupOptions group_options;
  group_options.timeout = dist::Milliseconds(static_cast<std::int64_t>(cfg.watchdog_timeout * 1000.0));

  return with_preset(cfg.model, [&]<class M>(std::type_identity<M>) {
    // What only the preset and the data can refuse, checked and loaded alike on every rank: under
    // MPI a refusal is said once (dist::agree_on_success), not once per rank.
    auto load = [&] {
      if constexpr (LanguageModel<M>) {
        TextRun text = load_text_run(cfg, target, M::vocab);
        cfg.vocabulary = text.tokenizer.to_text();
        return text;
      } else {
        return load_image_run(cfg, target, M::in_dim, M::out_dim);
      }
    };
    std::optional<decltype(load())> loaded;
    auto prepare = [&] {
      check_preset_options<M>(cfg);
      loaded.emplace(load());
      cfg.data_fingerprint = loaded->fingerprint;
      if (LanguageModel<M> && !cfg.init_from.empty()) check_init_vocabulary(cfg);
    };
    if (mpi) {
      select_rank_device(target);  // collective
      dist::agree_on_success(MPI_COMM_WORLD, prepare);
    } else {
      prepare();
    }
    const auto& run = *loaded;

    // The same options can still read other data: another file at the same path on another node.
    if (mpi) {
      const dist::Setting data{"the data", detail::concat("hash ", hex64(run.fingerprint), " of ",
                                                         run.describe(cfg))};
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
      // Rank 0 alone locks the checkpoint directory (io/checkpoint_lock.hpp says why) and owns
      // the output directory; its refusal (another run's directory) ends every rank alike before
      // any rank writes, said once.
      std::unique_ptr<RunClaim> claim;
      dist::agree_on_success(MPI_COMM_WORLD, [&] {
        if (group->rank() == 0) claim = claim_run(cfg, progress);
      });
      if (group->rank() == 0) {
        outcome.out_dir = claim->files.out.string();
        header(group->size(), group->backend(), group->nodes(), omp_get_max_threads());
      }
      RunFiles* files = claim ? &claim->files : nullptr;
      const TrainSummary summary =
          train_rank<M>(cfg, *group, run, files ? &progress : nullptr, files);
      // Every rank returns its summary: the stop signal and the checkpoint are valid on all,
      // so every process of a stopped job exits "to be resumed".
      outcome.summary = summary;
      outcome.rank = group->rank();
      return outcome;
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
