// The trainer that keeps its model between calls (train/fit.hpp) and a callback that stops a run
// (TrainCallbacks::should_stop). The properties: fits in pieces train the very numbers of one run
// (bit for bit, under ZeRO-3 on two simulated ranks, through the cosine schedule); a fit past the
// schedule's span extends it; evaluate() is the run's own evaluation; a saved state continues on
// another trainer, world size and policy; should_stop ends a run at the record it answers, as at
// its last step; and every misuse is one line naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "catalogue_test_util.hpp"
#include "cli_test_util.hpp"
#include "io/checkpoint.hpp"
#include "saved_params.hpp"
#include "train/fit.hpp"
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

// 48 training rows in batches of 8: 6 steps per epoch.
constexpr std::int64_t kStepsPerEpoch = 6;

struct RegressionData {
  RegressionData() {
    write_regression(dir.path(), "train", 48);
    write_regression(dir.path(), "test", 16);
  }
  TempDir dir;
  InstalledCatalogue installed{ModelCatalogue(
      {model_entry<UserNet>("user-net", "mine"), model_entry<UserNet>("other-net", "not mine")})};
};

std::vector<float> saved(const std::filesystem::path& model_h5) {
  return testing::saved_values<UserNet>(model_h5, "user-net");
}

TEST(TrainerObject, FitsInPiecesTrainTheNumbersOfOneRunAndAFitPastTheScheduleExtendsIt) {
  const RegressionData data;
  const TempDir& dir = data.dir;
  TrainConfig cfg = zero3_run(dir, "user-net", 3, 8);  // warmup-cosine over 3 epochs
  cfg.out = (dir / "whole").string();
  const TrainOutcome whole = run_train(cfg);
  ASSERT_EQ(whole.summary.steps, 3 * kStepsPerEpoch);

  cfg.out = (dir / "pieces").string();
  Trainer trainer(cfg);
  EXPECT_EQ(trainer.options().checkpoint_dir, (dir / "pieces/checkpoints").string());
  EXPECT_EQ(trainer.fit(1).summary.steps, kStepsPerEpoch);
  const std::filesystem::path after_one = trainer.state();
  EXPECT_EQ(after_one.filename(), io::step_dir_name(kStepsPerEpoch));
  const TrainOutcome rest = trainer.fit(2);
  EXPECT_EQ(rest.summary.steps, 3 * kStepsPerEpoch);
  EXPECT_EQ(saved(dir / "pieces/model.h5"), saved(dir / "whole/model.h5"));
  // One record of the run: three epochs in its metrics, as the whole run's.
  EXPECT_EQ(testing::metrics_records(dir / "pieces/metrics.jsonl", "epoch").size(), 3u);

  // The trainer's evaluation is the run's own, on one process.
  const EvalResult eval = trainer.evaluate();
  EXPECT_EQ(eval.samples, 16);
  EXPECT_NEAR(eval.loss, rest.summary.last.test_loss, 1e-5 * rest.summary.last.test_loss);

  // Past the 3 epochs the options gave: the schedule now spans 4.
  const TrainOutcome more = trainer.fit(1);
  EXPECT_EQ(more.summary.steps, 4 * kStepsPerEpoch);
  EXPECT_EQ(more.summary.last.epoch, 4);
  EXPECT_EQ(more.summary.last.epochs, 4);
  EXPECT_NE(saved(dir / "pieces/model.h5"), saved(dir / "whole/model.h5"));
}

TEST(TrainerObject, ASavedStateContinuesOnAnotherTrainerWorldAndPolicy) {
  const RegressionData data;
  const TempDir& dir = data.dir;
  TrainConfig cfg = zero3_run(dir, "user-net", 2, 8);
  cfg.out = (dir / "first").string();
  Trainer first(cfg);
  expect_error_containing([&] { (void)first.evaluate(); }, "no state yet (fit or load first)");
  expect_error_containing([&] { first.save(dir / "early"); }, "no state yet");
  expect_error_containing([&] { (void)first.fit(0); }, "Trainer::fit: 0 periods");
  (void)first.fit(1);
  first.save(dir / "saved");
  (void)first.fit(1);

  // One rank under DDP, its own output, from the saved state.
  TrainConfig other = cfg;
  other.sim_ranks = 0;
  other.policy = dist::Policy::Ddp;
  other.out = (dir / "second").string();
  Trainer second(other);
  second.load(dir / "saved");
  EXPECT_EQ(second.fit(1).summary.steps, 2 * kStepsPerEpoch);
  const std::vector<float> a = saved(dir / "first/model.h5");
  const std::vector<float> b = saved(dir / "second/model.h5");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << i;

  // A state loaded from elsewhere replaces the trainer's own checkpoints at the next fit.
  second.load(dir / "saved");
  EXPECT_EQ(second.fit(1).summary.steps, 2 * kStepsPerEpoch);

  // Misuse, each one line.
  std::filesystem::create_directories(dir / "full");
  testing::write_bytes(dir / "full/notes.txt", {'m', 'e'}, false);
  expect_error_containing([&] { first.save(dir / "full"); },
                          "exists and is not an empty directory");
  EXPECT_TRUE(std::filesystem::exists(dir / "full/notes.txt"));
  expect_error_containing([&] { second.load(dir / "full"); }, "not a checkpoint");
  TrainConfig foreign = cfg;
  foreign.model = "other-net";
  foreign.out = (dir / "foreign").string();
  Trainer third(foreign);
  expect_error_containing([&] { third.load(dir / "saved"); },
                          "holds model 'user-net', this trainer's is 'other-net'");
  cfg.sim_ranks = 2;
  expect_error_containing([&] { Trainer(cfg, MPI_COMM_WORLD); }, "--sim-ranks 2 with MPI ranks");
}

// A language model's periods are evaluation periods of eval_every steps: two fits of one equal
// one run of both, and a third goes past --steps, drawing the windows a longer run would.
TEST(TrainerObject, FitsALanguageModelByEvaluationPeriods) {
  const TempDir dir;
  const std::filesystem::path corpus = dir / "corpus.txt";
  {
    std::ofstream out(corpus);
    for (int i = 0; i < 200; ++i) out << "a stitch in time saves nine, line " << i % 13 << "\n";
  }
  TrainConfig cfg;
  cfg.model = "gpt-tiny";
  cfg.data = DatasetKind::Text;
  cfg.text_file = corpus.string();
  cfg.steps = 4;
  cfg.eval_every = 2;
  cfg.eval_batches = 1;
  cfg.batch = 4;
  cfg.block = 8;
  cfg.threads = 1;
  cfg.sim_ranks = 2;
  cfg.out = (dir / "whole").string();
  (void)run_train(cfg);
  cfg.out = (dir / "pieces").string();
  Trainer trainer(cfg);
  EXPECT_EQ(trainer.fit(1).summary.steps, 2);
  EXPECT_EQ(trainer.fit(1).summary.steps, 4);
  EXPECT_EQ(testing::saved_values<presets::GptTiny>(dir / "pieces/model.h5", "gpt-tiny"),
            testing::saved_values<presets::GptTiny>(dir / "whole/model.h5", "gpt-tiny"));
  const TrainOutcome more = trainer.fit(1);
  EXPECT_EQ(more.summary.steps, 6);
  EXPECT_EQ(more.summary.periods, 3);
}

TEST(TrainCallbacks, ShouldStopEndsTheRunAtTheRecordItAnswersAsAtItsLastStep) {
  const RegressionData data;
  const TempDir& dir = data.dir;
  TrainConfig cfg = zero3_run(dir, "user-net", 3, 8);
  cfg.checkpoint_dir = (dir / "ck").string();

  // Early stopping after an epoch's evaluation: the checkpoint and model.h5 of that epoch.
  int epochs_seen = 0;
  TrainCallbacks after_epoch;
  after_epoch.on_epoch = [&](const EpochRecord&) { ++epochs_seen; };
  after_epoch.should_stop = [&] { return epochs_seen == 1; };
  const TrainOutcome early = run_train(cfg, after_epoch);
  EXPECT_TRUE(early.summary.stopped_early);
  EXPECT_EQ(early.summary.stop_signal, 0);
  EXPECT_EQ(early.summary.steps, kStepsPerEpoch);
  EXPECT_EQ(epochs_seen, 1);
  EXPECT_EQ(early.summary.checkpoint.filename(), io::step_dir_name(kStepsPerEpoch));
  EXPECT_TRUE(std::filesystem::exists(dir / "user-net/model.h5"));

  // At a logged step, in the middle of an epoch: no evaluation of it.
  std::int64_t last_step = 0;
  TrainCallbacks at_step;
  at_step.on_step = [&](const StepRecord& r) { last_step = r.step; };
  at_step.on_epoch = [&](const EpochRecord&) { ADD_FAILURE() << "an epoch was evaluated"; };
  at_step.should_stop = [&] { return last_step == 2; };
  cfg.log_every = 1;
  cfg.checkpoint_dir.clear();
  cfg.out = (dir / "at-step").string();
  const TrainOutcome stopped = run_train(cfg, at_step);
  EXPECT_TRUE(stopped.summary.stopped_early);
  EXPECT_EQ(stopped.summary.steps, 2);
  EXPECT_TRUE(std::filesystem::exists(dir / "at-step/model.h5"));

  // A should_stop that throws is a callback failure: the run finishes and then says so.
  TrainCallbacks failing;
  failing.should_stop = []() -> bool { throw std::runtime_error("no verdict"); };
  cfg.out = (dir / "failing").string();
  expect_error_containing<Error>([&] { (void)run_train(cfg, failing); },
                                 "a training callback threw: should_stop: no verdict");
  EXPECT_TRUE(std::filesystem::exists(dir / "failing/model.h5"));
}

}  // namespace
}  // namespace noeira
