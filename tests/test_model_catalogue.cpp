// The model catalogue: the names --model resolves, the presets' and a user's own model's alike.
// The properties: the presets' catalogue is their table, in order, with what each model is; a
// catalogue no command line could use is refused naming the entry; and a model type noeira does
// not ship trains, resumes, evaluates and exports through the same path as a preset, and under
// its own name, once its catalogue is installed.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "catalogue_test_util.hpp"
#include "cli_test_util.hpp"
#include "io/params_file.hpp"
#include "io_test_files.hpp"
#include "nn/layernorm.hpp"
#include "train/export.hpp"
#include "train/model_entry.hpp"
#include "train/presets.hpp"
#include "train/run.hpp"

namespace noeira {
namespace {

using testing::InstalledCatalogue;
using testing::TempDir;
using testing::UserNet;
using testing::expect_error_containing;
using testing::write_regression;
using testing::zero3_run;

TEST(PresetCatalogue, IsThePresetTableInOrderWithWhatEachModelIs) {
  const ModelCatalogue catalogue = preset_catalogue();
  ASSERT_EQ(catalogue.entries().size(), std::size(kPresets));
  for (std::size_t i = 0; i < std::size(kPresets); ++i) {
    const ModelEntry& e = catalogue.entries()[i];
    EXPECT_EQ(e.name, kPresets[i].name);
    EXPECT_EQ(e.description, kPresets[i].description);
    EXPECT_EQ(e.defaults.size(), kPresets[i].defaults.size()) << e.name;
    const bool text = e.name.starts_with("gpt") || e.name.starts_with("lstm") ||
                      e.name.starts_with("gru");
    EXPECT_EQ(e.language_model(), text) << e.name;
    EXPECT_EQ(e.gpt_shape != nullptr, e.name.starts_with("gpt")) << e.name;
  }
  EXPECT_EQ(catalogue.find("gpt2-124m").gpt_shape->vocab, 50257);
  EXPECT_EQ(catalogue.find("resnet20").defaults.front().flag, "--optimizer");
  expect_error_containing([&] { (void)catalogue.find("resnet"); },
                          "unknown model 'resnet', expected one of: mlp, linear,");
}

TEST(ModelCatalogue, RefusesWhatNoCommandLineCouldUseNamingTheEntry) {
  auto entry = [](std::string name) { return model_entry<UserNet>(std::move(name), "a net"); };
  expect_error_containing([] { ModelCatalogue({}); }, "no model in it");
  expect_error_containing([&] { ModelCatalogue({entry("net"), entry("net")}); },
                          "two models are named 'net'");
  for (const char* bad : {"", "my net", "a/b", "x\n"}) {
    expect_error_containing([&] { ModelCatalogue({entry(bad)}); }, "is not 1 to 64 letters");
  }
  ModelEntry hand_made;
  hand_made.name = "hand";
  expect_error_containing([&] { ModelCatalogue({hand_made}); },
                          "model 'hand' was not made by model_entry<M>");
  expect_error_containing(
      [] { ModelCatalogue({model_entry<UserNet>("net", "a net", {{"--model", "mlp"}})}); },
      "defaults '--model'");
  expect_error_containing(
      [] { ModelCatalogue({model_entry<UserNet>("net", "a net", {{"lr", "1"}})}); },
      "defaults 'lr'");
}

TEST(ModelCatalogue, AUserModelTakesThePresetsPathUnderItsOwnName) {
  const TempDir dir;
  write_regression(dir.path(), "train", 96);
  write_regression(dir.path(), "test", 32);
  const InstalledCatalogue installed(ModelCatalogue({model_entry<UserNet>("user-net", "mine")}));

  TrainConfig cfg = zero3_run(dir, "user-net", 2, 16);
  cfg.checkpoint_dir = (dir / "ckpt").string();
  cfg.checkpoint_every = 6;
  cfg.out = (dir / "run").string();
  const TrainOutcome whole = run_train(cfg);
  EXPECT_EQ(whole.summary.steps, 12);
  EXPECT_EQ(whole.parameters, 6 * 16 + 16 + 2 * 16 + 16 * 2 + 2);
  EXPECT_EQ(io::read_params_model(dir / "run/model.h5"), "user-net");

  // Resumed from the middle on one rank under DDP: the same model within the tolerance.
  TrainConfig resumed = cfg;
  resumed.sim_ranks = 0;
  resumed.policy = dist::Policy::Ddp;
  resumed.checkpoint_dir.clear();
  resumed.resume = (dir / "ckpt/step-00000006").string();
  resumed.out = (dir / "resumed").string();
  const TrainOutcome second = run_train(resumed);
  EXPECT_EQ(second.summary.steps, 12);

  TrainConfig eval;
  eval.model.clear();  // the one the file names
  eval.params = (dir / "run/model.h5").string();
  eval.data = DatasetKind::Npy;
  eval.data_dir = cfg.data_dir;
  const EvalResult first = run_eval(eval);
  eval.params = (dir / "resumed/model.h5").string();
  const EvalResult other = run_eval(eval);
  EXPECT_TRUE(first.regression);
  EXPECT_EQ(first.samples, 32);
  EXPECT_TRUE(std::isfinite(first.loss) && first.loss > 0.0);
  EXPECT_NEAR(other.loss, first.loss, 1e-4 * first.loss);

  ExportConfig e;
  e.params = (dir / "run/model.h5").string();
  e.out = (dir / "net.safetensors").string();
  const ExportResult exported = run_export(e);
  EXPECT_EQ(exported.model, "user-net");
  EXPECT_EQ(exported.tensors, 6);

  // The presets are not this program's models.
  cfg.model = "mlp";
  expect_error_containing([&] { (void)check_train_config(cfg); },
                          "unknown model 'mlp', expected one of: user-net");
}

// A model of one unit (a lone Linear) trains under ZeRO-3, and the header says that no rank then
// holds less than the whole model; the same model as a Sequential of two units is not told so.
TEST(ModelCatalogue, AOneUnitModelUnderZero3IsToldItShardsNothing) {
  const TempDir dir;
  write_regression(dir.path(), "train", 32);
  write_regression(dir.path(), "test", 8);
  const InstalledCatalogue installed(ModelCatalogue(
      {model_entry<Linear<6, 2>>("lone", "one unit"), model_entry<UserNet>("user-net", "mine")}));
  for (const char* model : {"lone", "user-net"}) {
    const TrainConfig cfg = zero3_run(dir, model, 1, 8);
    ::testing::internal::CaptureStdout();
    (void)run_train(cfg);
    const std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(out.find("is one unit, so ZeRO-3 gathers all of its parameters") != std::string::npos,
              std::string(model) == "lone")
        << out;
  }
}

// A program that drives training sees rank 0's records as they are made, the very ones
// metrics.jsonl gets, on simulated ranks too; a callback that throws is not called again, the run
// finishes, and run_train then says what it threw.
TEST(TrainCallbacks, SeeRankZerosRecordsAsMetricsGetsThemAndAFailureAfterTheRun) {
  const TempDir dir;
  write_regression(dir.path(), "train", 32);
  write_regression(dir.path(), "test", 8);
  const InstalledCatalogue installed(ModelCatalogue({model_entry<UserNet>("user-net", "mine")}));
  TrainConfig cfg = zero3_run(dir, "user-net", 3, 8);  // 4 steps per epoch, 2 simulated ranks
  cfg.log_every = 2;
  std::vector<double> step_losses;
  std::vector<std::int64_t> steps;
  std::vector<double> test_losses;
  TrainCallbacks callbacks;
  callbacks.on_step = [&](const StepRecord& r) {
    step_losses.push_back(r.loss);
    steps.push_back(r.step);
  };
  callbacks.on_epoch = [&](const EpochRecord& r) { test_losses.push_back(r.test_loss); };
  (void)run_train(cfg, callbacks);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{2, 4, 6, 8, 10, 12}));
  const auto logged = testing::metrics_records(dir / "user-net/metrics.jsonl", "step");
  const auto epochs = testing::metrics_records(dir / "user-net/metrics.jsonl", "epoch");
  ASSERT_EQ(logged.size(), step_losses.size());
  ASSERT_EQ(epochs.size(), test_losses.size());
  for (std::size_t i = 0; i < logged.size(); ++i) EXPECT_EQ(logged[i]["loss"], step_losses[i]);
  for (std::size_t i = 0; i < epochs.size(); ++i) EXPECT_EQ(epochs[i]["test_loss"], test_losses[i]);

  int calls = 0;
  TrainCallbacks failing;
  failing.on_step = [&](const StepRecord&) {
    ++calls;
    throw std::runtime_error("the monitor's disk is full");
  };
  cfg.out = (dir / "failing").string();
  expect_error_containing<Error>([&] { (void)run_train(cfg, failing); },
                                     "a training callback threw: on_step: the monitor's disk is "
                                     "full (the run finished: ");
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(std::filesystem::exists(dir / "failing/model.h5"));
}

// A run over a communicator of the caller's needs the caller's MPI (this test process never
// initializes it), and its ranks are the communicator's, not simulated ones.
TEST(RunTrainOverACommunicator, RefusesWithoutTheCallersMpiOrWithSimulatedRanks) {
  TrainConfig cfg;
  expect_error_containing([&] { (void)run_train(cfg, MPI_COMM_WORLD); }, "MPI is not initialized");
  cfg.sim_ranks = 2;
  expect_error_containing([&] { (void)run_train(cfg, MPI_COMM_WORLD); },
                          "--sim-ranks 2 with a communicator");
}

}  // namespace
}  // namespace noeira
