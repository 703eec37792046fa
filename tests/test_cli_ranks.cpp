// Ranks and the batch: a short last batch that leaves a rank without rows (the rank still takes
// part in the step, and the run is the one a single rank trains), and a batch smaller than the
// ranks, refused before anything is loaded.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "io_test_files.hpp"
#include "saved_params.hpp"

namespace noeira {
namespace {

using testing::Output;
using testing::TempDir;
using testing::expect_one_error_line;
using testing::noeira;
using testing::saved_mlp;

// The last epoch record's train loss in a metrics file.
double last_train_loss(const std::filesystem::path& metrics) {
  const std::vector<nlohmann::json> epochs = testing::metrics_records(metrics, "epoch");
  return epochs.empty() ? NAN : epochs.back()["train_loss"].get<double>();
}

// How far a saved model's parameters are from the reference run's, and docs/design.md's tolerance
// between runs on different numbers of ranks.
double worst_difference(const std::vector<float>& values, const std::vector<float>& reference) {
  EXPECT_EQ(values.size(), reference.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < std::min(values.size(), reference.size()); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(values[i] - reference[i])));
  }
  return worst;
}

double rank_tolerance(const std::vector<float>& reference) {
  double max_p = 0.0;
  for (float p : reference) max_p = std::max(max_p, static_cast<double>(std::fabs(p)));
  return 1e-4 * max_p + 1e-6;
}

// Trains `run` on one rank, then with `flags` under each policy: every run must end within
// docs/design.md's tolerance of the one-rank parameters, with its last train loss within 1e-5.
void expect_runs_match_one_rank(const TempDir& dir, const std::string& run,
                                const std::string& flags,
                                std::initializer_list<std::string> policies) {
  const Output one = noeira(dir, run + "--out " + (dir / "one").string());
  ASSERT_EQ(one.code, 0) << one.err;
  const std::vector<float> reference = saved_mlp(dir / "one" / "model.h5");
  for (const std::string& policy : policies) {
    const std::filesystem::path out = dir / policy;
    const Output ranks =
        noeira(dir, run + flags + " --policy " + policy + " --out " + out.string());
    ASSERT_EQ(ranks.code, 0) << policy << ": " << ranks.err;
    EXPECT_LE(worst_difference(saved_mlp(out / "model.h5"), reference),
              rank_tolerance(reference))
        << policy;
    EXPECT_NEAR(last_train_loss(out / "metrics.jsonl"),
                last_train_loss(dir / "one" / "metrics.jsonl"), 1e-5)
        << policy;
  }
}

TEST(CliRanks, RankWithoutRowsInTheShortLastBatchTakesPartInTheStep) {
  REQUIRE_BINARY();
  TempDir dir;
  // 8 samples in batches of 3: the last batch has 2 rows, so at 3 ranks rank 0 has none.
  testing::write_tiny_mnist(dir / "data", 8, 10, false);
  const std::string run = "train --data-dir " + (dir / "data").string() +
                          " --batch 3 --epochs 2 --threads 1 --log-every 1 ";
  // ZeRO-3 too: its forward gathers every unit, so the idle rank's forward is needed there. The
  // loss check shows the idle rank's stand-in row is not counted.
  expect_runs_match_one_rank(dir, run, "--sim-ranks 3", {"ddp", "zero3"});
}

TEST(CliRanks, BatchSmallerThanTheRanksIsAnErrorBeforeTheData) {
  REQUIRE_BINARY();
  TempDir dir;
  // No data directory: the batch is refused before anything is read.
  expect_one_error_line(
      noeira(dir, "train --sim-ranks 3 --batch 2 --data-dir " + (dir / "none").string()),
      "--batch 2 is smaller than the 3 ranks");
}

// --accum: micro-batches of the same global batch, through the whole binary, under MPI-free
// simulated ranks: the run one rank trains on whole batches (docs/design.md's tolerance), and a
// micro-batch too small for the ranks, or more micro-batches than rows, refused up front.
TEST(CliRanks, AccumulatedMicroBatchesTrainTheRunOfWholeBatches) {
  REQUIRE_BINARY();
  TempDir dir;
  testing::write_tiny_mnist(dir / "data", 20, 10, false);
  const std::string run = "train --data-dir " + (dir / "data").string() +
                          " --batch 6 --epochs 2 --threads 1 --log-every 1 ";
  expect_runs_match_one_rank(dir, run, "--accum 3 --sim-ranks 2", {"zero1", "zero3"});
}

// The global batch and the step are what a checkpoint holds; the micro-batches are not, so a
// run may resume with another --accum (a smaller machine, a larger model) and end where the
// uninterrupted run ends, within the tolerance.
TEST(CliRanks, ResumeMayChangeTheAccumulation) {
  REQUIRE_BINARY();
  TempDir dir;
  testing::write_tiny_mnist(dir / "data", 20, 10, false);
  const std::string run = "train --data-dir " + (dir / "data").string() +
                          " --batch 6 --epochs 2 --threads 1 --log-every 1 ";
  const Output whole = noeira(dir, run + "--out " + (dir / "whole").string());
  ASSERT_EQ(whole.code, 0) << whole.err;
  const std::string ckpt = (dir / "ckpt").string();
  const Output first = noeira(dir, run + "--checkpoint-dir " + ckpt + " --checkpoint-every 3 " +
                                       "--out " + (dir / "first").string());
  ASSERT_EQ(first.code, 0) << first.err;
  const Output resumed =
      noeira(dir, run + "--accum 2 --sim-ranks 3 --policy zero2 --checkpoint-dir " + ckpt +
                      " --resume " + (dir / "ckpt" / "step-00000003").string() + " --out " +
                      (dir / "resumed").string());
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE((resumed.out + resumed.err).find("resumed from"), std::string::npos) << resumed.out;
  const std::vector<float> reference = saved_mlp(dir / "whole" / "model.h5");
  EXPECT_LE(worst_difference(saved_mlp(dir / "resumed" / "model.h5"), reference),
            rank_tolerance(reference));
}

TEST(CliRanks, MicroBatchesSmallerThanTheRanksAreAnErrorBeforeTheData) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string none = " --data-dir " + (dir / "none").string();
  expect_one_error_line(noeira(dir, "train --sim-ranks 2 --batch 6 --accum 4" + none),
                        "--accum 4 splits --batch 6 into micro-batches of 1 rows, fewer than the "
                        "2 ranks");
  expect_one_error_line(noeira(dir, "train --batch 6 --accum 7" + none),
                        "--accum 7 is more micro-batches than the 6 rows of --batch");
}

// --grad-dtype bf16 reduces the gradients as they are held and cannot accumulate micro-batches:
// asking for either is one line before any data is read.
TEST(CliRanks, Bf16GradientsSayWhatTheyNeed) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string none = " --data-dir " + (dir / "none").string();
  expect_one_error_line(noeira(dir, "train --grad-dtype bf16" + none),
                        "--grad-dtype bf16 reduces the gradients as they are held, in bf16 with "
                        "fp32 sums: add --reduce-dtype bf16");
  expect_one_error_line(
      noeira(dir, "train --grad-dtype bf16 --reduce-dtype bf16 --accum 2" + none),
      "--grad-dtype bf16 with --accum 2: the micro-batches' sums would be rounded to bfloat16 at "
      "every add; accumulate in fp32 gradients (--grad-dtype fp32)");
}

// A process with more threads than the CPUs it may run on (as `mpirun -np 1 noeira train
// --threads 2` is: Open MPI binds a rank to one core) says so in its header, and how to give the
// rank its cores; one within its CPUs does not.
TEST(CliRanks, MoreThreadsThanTheProcessesCpusAreNamedInTheHeader) {
  REQUIRE_BINARY();
  TempDir dir;
  testing::write_tiny_mnist(dir / "data", 20, 10, false);
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);  // the child inherits it
  const std::string run = "train --data-dir " + (dir / "data").string() + " --batch 10 --epochs 1";
  const Output two = noeira(dir, run + " --threads 2 --out " + (dir / "two").string());
  const Output sim =
      noeira(dir, run + " --threads 2 --sim-ranks 2 --out " + (dir / "sim").string());
  const Output fits = noeira(dir, run + " --threads 1 --out " + (dir / "one").string());
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
  ASSERT_EQ(two.code, 0) << two.err;
  EXPECT_NE(two.out.find("threads per rank 2 (but this process may run on 1 CPU: its threads "
                         "share cores; under mpirun, --bind-to none"),
            std::string::npos)
      << two.out;
  ASSERT_EQ(sim.code, 0) << sim.err;  // 2 ranks of 1 thread: 2 threads in the process
  EXPECT_NE(sim.out.find("threads per rank 1 (but this process may run on 1 CPU"),
            std::string::npos)
      << sim.out;
  ASSERT_EQ(fits.code, 0) << fits.err;
  EXPECT_EQ(fits.out.find("may run on"), std::string::npos) << fits.out;
}

}  // namespace
}  // namespace noeira
