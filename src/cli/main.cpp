// The noeira command line: `noeira train` and `noeira eval` (more subcommands come with later
// issues: each is an add_*_command function and a branch in main).
//
// Every failure ends as one line on stderr, "noeira: error: ...", and a non-zero exit: 2 for a
// command-line mistake, 1 for anything found while running (a missing file, a bad value).
#include <cblas.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/json_config.hpp"
#include "distributed/mpi_process_group.hpp"
#include "distributed/residency.hpp"
#include "train/presets.hpp"
#include "io/checkpoint_reader.hpp"
#include "train/dataset.hpp"
#include "train/run.hpp"
#include "train/stop_signal.hpp"

namespace noeira::cli {

namespace {

struct Command {
  CLI::App* app = nullptr;
  const CLI::App* sibling = nullptr;  // whose config keys this command ignores
  TrainConfig config;
  std::string config_file;
  std::string log_format = "human";
};

std::string preset_list() {
  std::string s;
  for (const PresetInfo& p : kPresets) {
    s += "\n    ";
    s += p.name;
    s += ": ";
    s += p.description;
  }
  return s;
}

// Options shared by train and eval.
void add_common_options(Command& c) {
  CLI::App& a = *c.app;
  TrainConfig& t = c.config;
  a.add_option("--config", c.config_file,
               "JSON file of options (keys are option names); flags given here override it");
  a.add_option("--data", t.data, "Data set")
      ->check(CLI::IsMember(kDatasetNames.names()));
  a.add_option("--data-dir", t.data_dir,
               "Directory of the data set's files (empty: /usr/share/datasets/fashion-mnist, "
               "/usr/share/datasets/mnist or /usr/share/datasets/cifar-10-batches-bin)");
  a.add_option("--limit-test", t.limit_test, "Evaluate on the first N test samples only (0: all)")
      ->check(CLI::NonNegativeNumber);
  a.add_option("--threads", t.threads, "OpenMP and OpenBLAS threads (0: all cores)")
      ->check(CLI::NonNegativeNumber);
  a.add_option("--device", t.device,
               "cpu, or cuda: tensors on the GPU (one per MPI rank, NCCL between them; "
               "--sim-ranks N simulates N ranks on one GPU)")
      ->check(CLI::IsMember(kDeviceNames.names()));
  a.add_flag("--allow-tf32", t.allow_tf32,
             "cuda: TF32 tensor cores for matrix products (faster, 10-bit mantissa inputs)");
  a.add_option("--log-format", c.log_format,
               "human: progress bar on a terminal, plain lines otherwise; json: JSON lines on "
               "stdout")
      ->check(CLI::IsMember(kLogFormatNames.names()));
}

void add_train_command(CLI::App& app, Command& c) {
  c.app = app.add_subcommand("train", "Train a model preset on a data set");
  CLI::App& a = *c.app;
  TrainConfig& t = c.config;
  a.option_defaults()->always_capture_default();
  a.add_option("--model", t.model, "Model preset:" + preset_list());
  add_common_options(c);
  a.add_option("--limit-train", t.limit_train, "Train on the first N samples only (0: all)")
      ->check(CLI::NonNegativeNumber);
  a.add_option("--epochs", t.epochs, "Passes over the training set")->check(CLI::PositiveNumber);
  a.add_option("--batch", t.batch, "Global batch size (all ranks together)")
      ->check(CLI::PositiveNumber);
  a.add_option("--eval-batch", t.eval_batch, "Batch size of the evaluation")
      ->check(CLI::PositiveNumber);
  a.add_option("--optimizer", t.optimizer, "sgd, adam or adamw")
      ->check(CLI::IsMember(kOptimizerNames.names()));
  a.add_option("--lr", t.lr, "Base learning rate")->check(CLI::PositiveNumber);
  a.add_option("--momentum", t.momentum, "SGD momentum (0: none)")->check(CLI::NonNegativeNumber);
  a.add_option("--weight-decay", t.weight_decay,
               "Weight decay (L2 for sgd and adam, decoupled for adamw); not on biases")
      ->check(CLI::NonNegativeNumber);
  a.add_option("--schedule", t.schedule, "Learning-rate schedule: constant, warmup, warmup_cosine")
      ->check(CLI::IsMember(kScheduleNames.names()));
  a.add_option("--warmup", t.warmup, "Warmup steps (warmup, warmup_cosine)")
      ->check(CLI::NonNegativeNumber);
  a.add_option("--min-lr", t.min_lr, "Final learning rate of warmup_cosine")
      ->check(CLI::NonNegativeNumber);
  a.add_option("--grad-clip", t.grad_clip, "Clip gradients to this global norm (0: off)")
      ->check(CLI::NonNegativeNumber);
  a.add_option("--seed", t.seed, "Seed of initialization and data order");
  a.add_option("--out", t.out, "Output directory (empty: runs/<model>-<data>-<date-time>)");
  a.add_option("--log-every", t.log_every, "Steps between step records (0: epochs only)")
      ->check(CLI::NonNegativeNumber);
  a.add_option("--policy", t.policy,
               "Data-parallel sharding policy: ddp (replicas), zero1 (shard optimizer state), "
               "zero2 (+ gradients), zero3 (+ parameters)")
      ->check(CLI::IsMember(dist::kPolicyNames.names()));
  a.add_option("--sim-ranks", t.sim_ranks,
               "Simulate N ranks as threads of this process (0: off); under mpirun the ranks are "
               "the MPI processes")
      ->check(CLI::NonNegativeNumber);
  a.add_option("--bucket-mb", t.bucket_mb, "DDP gradient bucket size in MiB")
      ->check(CLI::PositiveNumber);
  a.add_option("--watchdog-timeout", t.watchdog_timeout,
               "Seconds a collective may wait for the other ranks before the run fails")
      ->check(CLI::PositiveNumber);
  a.add_flag("--report-memory", t.report_memory,
             "Print each rank's parameter, gradient and optimizer memory after the first step");
  a.add_option("--checkpoint-dir", t.checkpoint_dir,
               "Directory of rank-sharded checkpoints (empty: none); SIGTERM / SIGUSR1 then save "
               "one and exit with 75");
  a.add_option("--checkpoint-every", t.checkpoint_every,
               "Steps between checkpoints (0: only at the end)")
      ->check(CLI::NonNegativeNumber);
  a.add_option("--keep-last", t.keep_last, "Checkpoints kept (0: all)")
      ->check(CLI::NonNegativeNumber);
  a.add_option("--resume", t.resume,
               "Continue from a checkpoint: latest (of --checkpoint-dir) or a path; any number "
               "of ranks and any policy");
}

void add_eval_command(CLI::App& app, Command& c) {
  c.app = app.add_subcommand("eval", "Evaluate saved parameters on a data set's test split");
  CLI::App& a = *c.app;
  TrainConfig& t = c.config;
  t.model.clear();  // eval: the model the parameters file names
  a.option_defaults()->always_capture_default();
  a.add_option("--params", t.params, "Parameters file written by train (<out>/model.h5)");
  a.add_option("--checkpoint", t.eval_checkpoint,
               "Or a checkpoint: a checkpoint directory (its latest), a step directory");
  a.add_option("--model", t.model, "Model preset (empty: the one the parameters file names)");
  add_common_options(c);
  a.add_option("--eval-batch", t.eval_batch, "Batch size")->check(CLI::PositiveNumber);
}

void set_threads(int threads) {
  const int n = threads > 0 ? threads : omp_get_num_procs();
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

void finish_config(Command& c) {
  if (!c.config_file.empty()) apply_json_config(*c.app, c.config_file, c.sibling);
  c.config.log_format = parse_log_format(c.log_format);
  set_threads(c.config.threads);
}

int train_main(Command& c) {
  finish_config(c);
  const TrainOutcome outcome = run_train(c.config);
  const int signal = outcome.summary.stop_signal;
  if (signal != 0) {
    if (outcome.rank == 0) {
      std::cout.flush();
      std::fprintf(stderr,
                   "noeira: stopped by %s at step %lld to be resumed; checkpoint %s (continue "
                   "with --resume latest --checkpoint-dir %s)\n",
                   signal_name(signal), static_cast<long long>(outcome.summary.steps),
                   outcome.summary.checkpoint.string().c_str(), c.config.checkpoint_dir.c_str());
    }
    return kStoppedExitCode;
  }
  return 0;
}

int inspect_main(const std::string& path) {
  noeira::io::print_checkpoint_summary(std::cout, path);
  return 0;
}

int eval_main(Command& c) {
  finish_config(c);
  const EvalResult r = run_eval(c.config);
  if (c.config.log_format == LogFormat::Json) {
    std::cout << nlohmann::json{{"type", "eval"},
                                {"params", c.config.params.empty() ? c.config.eval_checkpoint
                                                                   : c.config.params},
                                {"test_loss", r.loss},
                                {"test_accuracy", r.accuracy},
                                {"test_samples", r.samples}}
                     .dump()
              << '\n';
  } else {
    std::printf("eval %s: test loss %.4f  test acc %.2f%%  (%lld samples)\n",
                (c.config.params.empty() ? c.config.eval_checkpoint : c.config.params).c_str(),
                r.loss, 100.0 * r.accuracy,
                static_cast<long long>(r.samples));
  }
  return 0;
}

}  // namespace

}  // namespace noeira::cli

int main(int argc, char** argv) {
  using namespace noeira::cli;
  CLI::App app{"noeira: train neural networks on CPUs and GPUs, on one machine or many"};
  app.require_subcommand(1);
  Command train;
  Command eval;
  add_train_command(app, train);
  add_eval_command(app, eval);
  std::string inspect_path;
  CLI::App* inspect = app.add_subcommand("inspect", "Print what a checkpoint holds");
  inspect->add_option("path", inspect_path,
                      "A checkpoint directory (its latest), a step directory or a latest file")
      ->required();
  train.sibling = eval.app;
  eval.sibling = train.app;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "noeira: error: " << e.what() << " (see noeira --help)\n";
    return 2;
  }
  // Under mpirun (or srun) this process is one rank: MPI is initialized here, for the whole run,
  // and a rank that fails aborts the job rather than leave its peers waiting in a collective.
  std::optional<noeira::dist::MpiRuntime> mpi;
  auto fail = [&](const char* what) {
    std::cout.flush();
    std::cerr << "noeira: error: " << what << '\n';
    if (mpi && mpi->world_size() > 1) {
      std::cerr.flush();
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return 1;
  };
  try {
    if (train.app->parsed() && noeira::dist::MpiRuntime::launched_by_mpi()) {
      mpi.emplace(&argc, &argv);
    }
    if (train.app->parsed()) return train_main(train);
    if (eval.app->parsed()) return eval_main(eval);
    if (inspect->parsed()) return inspect_main(inspect_path);
  } catch (const std::exception& e) {
    return fail(e.what());
  } catch (...) {
    return fail("unknown exception");
  }
  return 0;
}
