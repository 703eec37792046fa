// The command line: `train`, `eval`, `generate`, `inspect`, `export`, `plot`, `tokenize` (each is an
// add_*_command function and a branch in run_command_line).
//
// Every failure ends as one line on stderr, "<program>: error: ...", and a non-zero exit: 2 for a
// command-line mistake, 1 for anything found while running (a missing file, a bad value).
#include <cblas.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <new>
#include <string>
#include <string_view>

#include "cli/bounds.hpp"
#include "cli/choice_option.hpp"
#include "cli/command_line.hpp"
#include "cli/options.hpp"
#include "cli/plot.hpp"
#include "cli/tokenize_command.hpp"
#include "distributed/mpi_process_group.hpp"
#include "distributed/rank_agreement.hpp"
#include "distributed/residency.hpp"
#include "io/checkpoint_reader.hpp"
#include "kernels/cpu/blas_core.hpp"
#include "kernels/error.hpp"
#include "train/dataset.hpp"
#include "train/export.hpp"
#include "train/generate.hpp"
#include "train/name_map.hpp"
#include "train/run.hpp"
#include "train/stop_signal.hpp"

namespace noeira::cli {

namespace {

// An error as one line of bounded length: line breaks become spaces, and a message that quotes a
// huge value (a 100 MB flag, a file's contents) keeps its start and end with the middle cut.
std::string one_line(std::string_view what) {
  constexpr std::size_t kMaxBytes = 1000;
  std::string line(what);
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (line.size() <= kMaxBytes) return line;
  const std::size_t keep = kMaxBytes / 2;
  return detail::concat(line.substr(0, keep), " ... (", line.size() - 2 * keep,
                        " bytes not shown) ... ", line.substr(line.size() - keep));
}

int train_main(Command& c, bool mpi, const std::string& program) {
  // Under mpirun every rank checks its options alike: a refusal is one line, said by rank 0.
  auto finish = [&] {
    finish_config(c);
    (void)check_train_config(c.config);
  };
  if (mpi) {
    noeira::dist::agree_on_success(MPI_COMM_WORLD, finish);
  } else {
    finish();
  }
  const TrainOutcome outcome = run_train(c.config);
  if (!outcome.summary.save_failure.empty()) {
    // Every rank stopped alike; rank 0 says what was saved instead.
    if (outcome.rank == 0) {
      std::cout.flush();
      std::fprintf(stderr, "%s: error: %s\n", program.c_str(),
                   one_line(outcome.summary.save_failure).c_str());
    }
    return 1;
  }
  const int signal = outcome.summary.stop_signal;
  if (signal != 0) {
    if (outcome.rank == 0) {
      std::cout.flush();
      std::fprintf(stderr,
                   "%s: stopped by %s at step %lld to be resumed; checkpoint %s (continue "
                   "with --resume latest --checkpoint-dir %s)\n",
                   program.c_str(), signal_name(signal),
                   static_cast<long long>(outcome.summary.steps),
                   outcome.summary.checkpoint.string().c_str(), c.config.checkpoint_dir.c_str());
    }
    return kStoppedExitCode;
  }
  return 0;
}

int generate_main(const GenerateConfig& g) {
  std::cout << run_generate(g);
  if (g.prompt.empty() || g.prompt.back() != '\n') std::cout << '\n';
  return 0;
}

void add_generate_command(CLI::App& app, GenerateConfig& g) {
  CLI::App* a = app.add_subcommand(
      "generate", "Print text a trained language model writes after a prompt (no corpus needed: "
                  "the vocabulary travels with the parameters)");
  a->option_defaults()->always_capture_default();
  a->add_option("--params", g.params, "Parameters file written by train (<out>/model.h5)");
  a->add_option("--checkpoint", g.checkpoint, "Or a checkpoint (directory, its latest)");
  a->add_option("--model", g.model, "Model preset (empty: the one the file names)");
  a->add_option("--prompt", g.prompt, "Text to continue");
  a->add_option("--tokens", g.tokens, "Tokens to generate")->check(whole_in(0, 1'000'000));
  a->add_option("--temperature", g.temperature,
                "Softmax temperature (0: always the most likely token)")
      ->check(real_in(0.0, 1e3));
  a->add_option("--top-k", g.top_k, "Sample among the k most likely tokens (0: all)")
      ->check(whole_in(0, 1'000'000));
  a->add_option("--seed", g.seed, "Seed of the sampling: the same seed gives the same text")
      ->check(any_uint64());
  add_choice(*a, "--device", g.device, kDeviceNames, "cpu or cuda");
}

void add_export_command(CLI::App& app, ExportConfig& e) {
  CLI::App* a = app.add_subcommand(
      "export", "Write saved parameters as a safetensors file, under noeira's names or the "
                "PyTorch model's (docs/interop.md)");
  a->option_defaults()->always_capture_default();
  a->add_option("--params", e.params, "Parameters file: <out>/model.h5, or a .safetensors");
  a->add_option("--checkpoint", e.checkpoint, "Or a checkpoint (directory, its latest)");
  a->add_option("--model", e.model, "Model preset (empty: the one the source names)");
  a->add_option("--format", e.format, "Format of the written file")
      ->check(CLI::IsMember({"safetensors"}));
  add_choice(*a, "--names", e.names, kNameSchemeNames,
             "Tensor names of the written file: noeira (the parameter walk's) or pytorch "
             "(torch.nn.Sequential for the MLPs, Hugging Face GPT-2 for the GPTs, torchvision "
             "for the ResNets, embed + rnn + head for the recurrent LMs)");
  add_optional_choice(*a, "--source-names", e.source_names, kNameSchemeNames,
                      "Name map of a .safetensors source (empty: the one its metadata names)");
  a->add_option("-o,--out", e.out, "The file to write, <name>.safetensors")->required();
  a->add_flag("--allow-non-finite", e.allow_non_finite,
              "Read and write parameters that hold NaN or infinity (refused by default)");
}

int export_main(const ExportConfig& e) {
  const ExportResult r = run_export(e);
  std::printf("exported %s (%lld tensors, --names %s) to %s\n", r.model.c_str(),
              static_cast<long long>(r.tensors),
              std::string(kNameSchemeNames.name_of(e.names)).c_str(), e.out.c_str());
  return 0;
}

int inspect_main(const std::string& path) {
  noeira::io::print_checkpoint_summary(std::cout, path);
  return 0;
}

int eval_main(Command& c) {
  finish_config(c);
  const EvalResult r = run_eval(c.config);
  const std::string source = c.config.params.empty() ? c.config.eval_checkpoint : c.config.params;
  // A classifier or a regression reports on the test split; a language model on validation
  // windows, in tokens. A regression's R² is NaN where its test targets do not vary.
  const bool regression = r.regression;
  const bool text = std::isnan(r.accuracy) && !regression;
  if (c.config.log_format == LogFormat::Json) {
    nlohmann::json j{{"type", "eval"}, {"params", source}};
    if (text) {
      j["val_loss"] = r.loss;
      j["val_tokens"] = r.samples;
    } else {
      j["test_loss"] = r.loss;
      if (regression) {
        j["test_rmse"] = r.rmse;
        j["test_r2"] = r.r2;
      } else {
        j["test_accuracy"] = r.accuracy;
      }
      j["test_samples"] = r.samples;
    }
    std::cout << j.dump() << '\n';
  } else if (text) {
    std::printf("eval %s: val loss %.4f  (%lld tokens)\n", source.c_str(), r.loss,
                static_cast<long long>(r.samples));
  } else if (regression) {
    std::printf("eval %s: test loss %.4f  test rmse %.4g  r2 %.4f  (%lld samples)\n",
                source.c_str(), r.loss, r.rmse, r.r2,
                static_cast<long long>(r.samples));
  } else {
    std::printf("eval %s: test loss %.4f  test acc %.2f%%  (%lld samples)\n", source.c_str(),
                r.loss, 100.0 * r.accuracy, static_cast<long long>(r.samples));
  }
  return 0;
}

// The program's name in its messages: the binary's file name (noeira, or a user's program).
std::string program_name(const char* argv0) {
  const std::string_view path = argv0 != nullptr ? argv0 : "";
  const std::size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  return name.empty() ? std::string("noeira") : std::string(name);
}

}  // namespace

}  // namespace noeira::cli

int noeira::run_command_line(int argc, char** argv, std::vector<ModelEntry> models) {
  using namespace noeira::cli;
  const std::string program = program_name(argc > 0 ? argv[0] : nullptr);
  const std::string error = program + ": error: ";
  // First of all: OpenBLAS on its generic kernels on a CPU it does not know starts again on the
  // right ones (kernels/cpu/blas_core.hpp; 2-10x faster GEMMs where it applies).
  noeira::cpu::reexec_with_blas_core(argv);
  // Before any thread exists (OpenMP's, MPI's, the ranks'): a stop signal must never interrupt
  // a thread that computes (train/stop_signal.hpp).
  noeira::route_stop_signals_to_one_thread();
  // Before the options: --model's list and default are the catalogue's.
  try {
    install_model_catalogue(ModelCatalogue(std::move(models)));
  } catch (const std::exception& e) {
    std::cerr << error << one_line(e.what()) << '\n';
    return 1;
  }
  CLI::App app{program + ": train neural networks on CPUs and GPUs, on one machine or many"};
  app.require_subcommand(1);
  Command train;
  Command eval;
  add_train_command(app, train);
  add_eval_command(app, eval);
  noeira::GenerateConfig generate;
  add_generate_command(app, generate);
  std::string inspect_path;
  CLI::App* inspect = app.add_subcommand("inspect", "Print what a checkpoint holds");
  inspect->add_option("path", inspect_path,
                      "A checkpoint directory (its latest), a step directory or a latest file")
      ->required();
  noeira::ExportConfig export_config;
  add_export_command(app, export_config);
  PlotOptions plot;
  add_plot_command(app, plot);
  noeira::TokenizeConfig tokenize;
  add_tokenize_command(app, tokenize);
  train.sibling = eval.app;
  eval.sibling = train.app;
  // CLI11 would call a misspelt subcommand a missing one ("A subcommand is required").
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    std::string known;
    bool found = false;
    const CLI::App& top = app;
    for (const CLI::App* sub : top.get_subcommands([](const CLI::App*) { return true; })) {
      found = found || sub->get_name() == word;
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!found) {
      std::cerr << error << "unknown subcommand " << shown_argument(word) << " (one of " << known
                << "; see " << program << " --help)\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << error << one_line(e.what()) << " (see " << program << " --help)\n";
    return 2;
  }
  // Under mpirun (or srun) this process is one rank: MPI is initialized here, for the whole run,
  // and a rank that fails aborts the job rather than leave its peers waiting in a collective.
  std::optional<noeira::dist::MpiRuntime> mpi;
  auto fail = [&](std::string_view what) {
    std::cout.flush();
    // One write: the ranks of a job share the terminal, and pieces of their lines would mix.
    std::cerr << (error + one_line(what) + '\n') << std::flush;
    if (mpi && mpi->world_size() > 1) {
      std::cerr.flush();
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return 1;
  };
  try {
    const bool tokenizing = app.got_subcommand("tokenize");
    if ((train.app->parsed() || tokenizing) && noeira::dist::MpiRuntime::launched_by_mpi()) {
      mpi.emplace(&argc, &argv);
    }
    if (tokenizing) return tokenize_main(tokenize, mpi ? MPI_COMM_WORLD : MPI_COMM_NULL);
    if (train.app->parsed()) return train_main(train, mpi.has_value(), program);
    if (eval.app->parsed()) return eval_main(eval);
    if (inspect->parsed()) return inspect_main(inspect_path);
    if (app.got_subcommand("generate")) return generate_main(generate);
    if (app.got_subcommand("plot")) return plot_main(plot);
    if (app.got_subcommand("export")) return export_main(export_config);
  } catch (const noeira::AgreedError& e) {
    // Every rank raised it together, so nobody waits: rank 0 says it once, and every rank ends
    // normally (MPI_Finalize in ~MpiRuntime) instead of racing the others to MPI_Abort.
    if (!mpi || mpi->world_rank() == 0) {
      std::cout.flush();
      std::cerr << error << one_line(e.what()) << '\n';
    }
    return 1;
  } catch (const std::bad_alloc&) {
    // A size no check foresaw: say what happened in words, not the library's name for it.
    return fail("out of memory: an allocation failed (the model, batch, data or a file's claims "
                "need more memory than this process can have)");
  } catch (const std::exception& e) {
    return fail(e.what());
  } catch (...) {
    return fail("unknown exception");
  }
  return 0;
}
