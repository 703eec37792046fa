// Runs that share a disk (issue 17, case 2) and runs that cannot save (case 5), end to end with
// the noeira binary on a tiny data directory: the default output directory is never shared, a
// checkpoint directory is locked for the life of a run and released when it dies, a fresh run
// refuses another run's checkpoints, resume refuses another data set, an unwritable checkpoint
// directory fails before training, and a save that fails mid-run still leaves model.h5.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli_test_util.hpp"
#include "io/checkpoint.hpp"
#include "io_test_files.hpp"
#include "train/run.hpp"

namespace noeira {
namespace {

using testing::Output;
using testing::TempDir;
using testing::expect_one_error_line;
using testing::latest_step;
using testing::noeira;
using testing::slurp;
using testing::spawn_noeira;

// 60 samples in 3 steps of 20, evaluated on 20: each run takes well under a second.
std::string tiny_run(const TempDir& dir) {
  testing::write_tiny_mnist(dir / "data", 60, 20, false);
  return "train --data-dir " + (dir / "data").string() +
         " --batch 20 --limit-test 20 --epochs 1 --threads 1 --log-every 0 ";
}

std::vector<std::filesystem::path> entries(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path());
  return out;
}

std::string stamp(std::time_t t) {
  std::tm local{};
  localtime_r(&t, &local);
  char s[32];
  std::strftime(s, sizeof s, "%Y%m%d-%H%M%S", &local);
  return s;
}

TEST(CliRuns, DefaultOutputDirectoryIsNeverShared) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string run = tiny_run(dir);
  // Another run's directory under every name the next seconds give: none may be written into.
  const std::time_t now = std::time(nullptr);
  std::vector<std::filesystem::path> taken;
  for (int s = -1; s <= 6; ++s) {
    taken.push_back(dir / "runs" / ("mlp-fashion-mnist-" + stamp(now + s)));
    std::filesystem::create_directories(taken.back());
    std::ofstream(taken.back() / "other-run") << "x";
  }
  // Two runs at once, in the same second, without --out.
  const std::string binary = NOEIRA_BINARY;
  const std::string one = "'" + binary + "' " + run + "</dev/null >/dev/null 2>";
  const std::string script = "cd '" + dir.path().string() + "' && { " + one + "err1 & " + one +
                             "err2 & wait; }";
  ASSERT_EQ(std::system(script.c_str()), 0);
  for (const auto& t : taken) {
    EXPECT_EQ(entries(t).size(), 1u) << t << " was another run's, and was written into";
  }
  std::vector<std::filesystem::path> made;
  for (const auto& e : entries(dir / "runs")) {
    if (std::find(taken.begin(), taken.end(), e) == taken.end()) made.push_back(e);
  }
  ASSERT_EQ(made.size(), 2u) << slurp(dir / "err1") << slurp(dir / "err2");
  for (const auto& m : made) {
    EXPECT_TRUE(std::filesystem::exists(m / "model.h5")) << m;
    const std::string metrics = slurp(m / "metrics.jsonl");
    EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), 1) << m << ": one run's record";
  }
}

TEST(CliRuns, CheckpointDirectoryIsLockedForTheLifeOfARun) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string run = tiny_run(dir);
  const std::string ckpt = (dir / "ckpt").string();
  // A long run (many epochs) that checkpoints every step.
  std::vector<std::string> args = {"train", "--data-dir", (dir / "data").string(), "--batch",
                                   "20", "--limit-test", "20", "--threads", "1", "--log-every",
                                   "0", "--epochs", "100000", "--checkpoint-every", "1",
                                   "--checkpoint-dir", ckpt, "--out", (dir / "first").string()};
  const pid_t first = spawn_noeira(dir, args);
  ASSERT_GT(first, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (latest_step(ckpt) < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(latest_step(ckpt), 1) << slurp(dir / "bg-stderr");

  // A second run in the same directory, resuming or not, is refused and names the holder.
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string holder = std::string("in use by another run (host ") + host + ", pid " +
                             std::to_string(first) + ", started ";
  expect_one_error_line(noeira(dir, run + "--checkpoint-dir " + ckpt + " --resume latest --out " +
                                        (dir / "second").string()),
                        holder);
  expect_one_error_line(noeira(dir, run + "--checkpoint-dir " + ckpt +
                                        " --overwrite-checkpoints --out " +
                                        (dir / "third").string()),
                        holder);
  EXPECT_FALSE(std::filesystem::exists(dir / "second")) << "a refused run writes nothing";

  // Killed, the holder's lock goes with it: the next run resumes.
  ::kill(first, SIGKILL);
  int status = 0;
  ::waitpid(first, &status, 0);
  const Output resumed = noeira(dir, run + "--checkpoint-dir " + ckpt + " --resume latest --out " +
                                         (dir / "resumed").string());
  EXPECT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resumed from"), std::string::npos) << resumed.out;
}

TEST(CliRuns, FreshRunRefusesAnotherRunsCheckpoints) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string run = tiny_run(dir) + "--checkpoint-dir " + (dir / "ckpt").string() + " ";
  const Output first = noeira(dir, run + "--out " + (dir / "first").string());
  ASSERT_EQ(first.code, 0) << first.err;
  ASSERT_EQ(latest_step(dir / "ckpt"), 3);

  const Output fresh = noeira(dir, run + "--out " + (dir / "fresh").string());
  expect_one_error_line(fresh, "holds the checkpoints of another run (newest step-00000003); "
                               "continue it with --resume latest, or pass "
                               "--overwrite-checkpoints");
  EXPECT_FALSE(std::filesystem::exists(dir / "fresh"));
  EXPECT_EQ(latest_step(dir / "ckpt"), 3);

  // The data set is part of what a resumed run must keep.
  expect_one_error_line(noeira(dir, run + "--data mnist --resume latest --out " +
                                        (dir / "mnist").string()),
                        "saved with --data fashion-mnist, this run has mnist");
  const Output resumed = noeira(dir, run + "--resume latest --out " + (dir / "resumed").string());
  EXPECT_EQ(resumed.code, 0) << resumed.err;

  // Told to, a fresh run discards them: 2 steps of its own, nothing of the other run's.
  const Output over = noeira(dir, run + "--limit-train 40 --overwrite-checkpoints --out " +
                                      (dir / "over").string());
  ASSERT_EQ(over.code, 0) << over.err;
  EXPECT_EQ(latest_step(dir / "ckpt"), 2);
  EXPECT_FALSE(std::filesystem::exists(dir / "ckpt" / "step-00000003"));
  expect_one_error_line(noeira(dir, run + "--overwrite-checkpoints --resume latest"),
                        "--overwrite-checkpoints and --resume");
}

TEST(CliRuns, UnwritableCheckpointDirectoryFailsBeforeTraining) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string run = tiny_run(dir);
  std::ofstream(dir / "plain") << "not a directory";
  // (As root a read-only directory is writable: a plain file and /proc stand for "cannot".)
  const std::vector<std::pair<std::string, std::string>> cases = {
      {(dir / "plain").string(), "exists and is not a directory"},
      {(dir / "plain" / "ckpt").string(), "cannot create the directory"},
      {"/proc/noeira-ckpt-" + std::to_string(::getpid()), "cannot create the directory"}};
  for (const auto& [ckpt, why] : cases) {
    const Output o = noeira(dir, run + "--checkpoint-dir " + ckpt + " --out " +
                                     (dir / "run").string());
    expect_one_error_line(o, "--checkpoint-dir " + ckpt + ": " + why);
    EXPECT_EQ(o.out.find("epoch 1/1"), std::string::npos) << "trained first: " << o.out;
  }
}

// A save that fails mid-run (a full disk, say; here a hook that throws at the second
// checkpoint's first file): the run stops there, on every rank, removes its temporary
// directory, keeps the last good checkpoint as `latest`, and still writes model.h5.
std::atomic<int> rank_files_opened{0};
void fail_second_checkpoint(std::string_view stage) {
  // 2 ranks: calls 3 and 4 are the second step's; both fail, as on a shared full disk.
  if (stage == "rank_file_open" && ++rank_files_opened >= 3) {
    throw InputError("No space left on device (test)");
  }
}

TEST(CheckpointSaveFailure, MidRunKeepsModelAndCleansUp) {
  TempDir dir;
  testing::write_tiny_mnist(dir / "data", 60, 20, false);
  TrainConfig cfg;
  cfg.data_dir = (dir / "data").string();
  cfg.batch = 20;
  cfg.limit_test = 20;
  cfg.epochs = 1;
  cfg.threads = 2;
  cfg.log_every = 0;
  cfg.sim_ranks = 2;
  cfg.checkpoint_dir = (dir / "ckpt").string();
  cfg.checkpoint_every = 1;
  cfg.out = (dir / "run").string();
  rank_files_opened = 0;
  io::test_hooks::set_checkpoint_hook(fail_second_checkpoint);
  TrainOutcome outcome;
  EXPECT_NO_THROW(outcome = run_train(cfg));
  io::test_hooks::set_checkpoint_hook(nullptr);
  const std::string& failure = outcome.summary.save_failure;
  EXPECT_NE(failure.find("checkpoint at step 2 failed: "), std::string::npos) << failure;
  EXPECT_NE(failure.find("No space left on device (test)"), std::string::npos) << failure;
  EXPECT_NE(failure.find("removed " + (dir / "ckpt" / ".tmp-step-00000002").string()),
            std::string::npos)
      << failure;
  EXPECT_NE(failure.find("the parameters of step 2 are in " + (dir / "run" / "model.h5").string()),
            std::string::npos)
      << failure;
  EXPECT_EQ(failure.find('\n'), std::string::npos) << "one line";
  EXPECT_TRUE(std::filesystem::exists(dir / "run" / "model.h5"));
  EXPECT_EQ(latest_step(dir / "ckpt"), 1);
  for (const auto& e : entries(dir / "ckpt")) {
    EXPECT_NE(e.filename().string().rfind(".tmp-", 0), 0u) << e << " left behind";
  }
}

}  // namespace
}  // namespace noeira
