// Checkpoints through the noeira binary, on a tiny data directory the test writes itself:
// - the resharding matrix: a checkpoint saved under every policy in {ddp, zero1, zero2, zero3} and
//   every N in 1..4 is loaded by another policy and another N, and with no step left saved again;
//   every logical tensor (values, Adam m and v) and the data cursor come back bit for bit;
// - SIGKILL of a run that checkpoints every step, at random moments: `latest` names a checkpoint
//   that `noeira inspect` reads and `--resume latest` loads (tests/checkpoint_kill.sh does the
//   same to one rank of an mpiexec run);
// - bad checkpoints (truncated or missing rank file, a flipped byte, another model) are one-line
//   errors naming the file or tensor, with a non-zero exit and no signal.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli_test_util.hpp"
#include "file_damage.hpp"
#include "io/checkpoint_reader.hpp"

namespace noeira {
namespace {

using testing::Output;
using testing::TempDir;
using testing::data_offset;
using testing::expect_one_error_line;
using testing::flip_byte;
using testing::inspect_tensors;
using testing::latest_step;
using testing::noeira;
using testing::slurp;
using testing::spawn_noeira;

const std::vector<std::string> kPolicies = {"ddp", "zero1", "zero2", "zero3"};

std::vector<std::uint32_t> bits(const std::vector<float>& v) {
  std::vector<std::uint32_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = std::bit_cast<std::uint32_t>(v[i]);
  return out;
}

// Every tensor of `b` equals the one of the same name in `a` bit for bit, and both hold the same
// names; the metadata agrees but for the layout that wrote it.
void expect_same_logical_state(const std::filesystem::path& a, const std::filesystem::path& b,
                               const std::string& what) {
  const io::CheckpointReader x = io::CheckpointReader::open(a);
  const io::CheckpointReader y = io::CheckpointReader::open(b);
  ASSERT_EQ(x.tensor_names(), y.tensor_names()) << what;
  for (const std::string& name : x.tensor_names()) {
    EXPECT_EQ(x.shape(name), y.shape(name)) << what << ": " << name;
    EXPECT_EQ(bits(x.read_all(name)), bits(y.read_all(name))) << what << ": " << name;
  }
  const io::CheckpointMeta& a_meta = x.meta();
  const io::CheckpointMeta& b_meta = y.meta();
  EXPECT_EQ(a_meta.step, b_meta.step) << what;
  EXPECT_EQ(a_meta.epoch, b_meta.epoch) << what;
  EXPECT_EQ(a_meta.samples_seen, b_meta.samples_seen) << what;
  EXPECT_EQ(a_meta.optimizer, b_meta.optimizer) << what;
  EXPECT_EQ(a_meta.signature, b_meta.signature) << what;
  EXPECT_EQ(a_meta.labels, b_meta.labels) << what;
  // Schedule and RNG state agree; per-rank entries ("....rank<r>") belong to the layout.
  auto global = [](const auto& map) {
    auto out = map;
    std::erase_if(out, [](const auto& kv) { return kv.first.find(".rank") != std::string::npos; });
    return out;
  };
  EXPECT_EQ(global(a_meta.scalars), global(b_meta.scalars)) << what;
  EXPECT_EQ(global(a_meta.counters), global(b_meta.counters)) << what;
}

// A tiny run on the test's own data: 600 samples in 6 steps of 100, one epoch, one thread per rank.
std::string tiny_run(const TempDir& dir) {
  return "train --data-dir " + (dir / "data").string() +
         " --limit-train 600 --limit-test 100 --batch 100 --epochs 1 --threads 1 --log-every 0 ";
}

std::string layout(const std::string& policy, int ranks) {
  return "--policy " + policy + " --sim-ranks " + std::to_string(ranks);
}

TEST(CheckpointMatrix, EverySaveLoadsBitIdenticalIntoAnotherPolicyAndRankCount) {
  REQUIRE_BINARY();
  TempDir dir;
  testing::write_tiny_mnist(dir / "data", 600, 100, false);
  const auto started = std::chrono::steady_clock::now();
  for (std::size_t p = 0; p < kPolicies.size(); ++p) {
    for (int n = 1; n <= 4; ++n) {
      const std::string from = kPolicies[p] + "-" + std::to_string(n);
      const Output saved = noeira(dir, tiny_run(dir) + layout(kPolicies[p], n) +
                                           " --checkpoint-dir " + (dir / from).string() +
                                           " --checkpoint-every 3 --keep-last 0 --out " +
                                           (dir / (from + "-out")).string());
      ASSERT_EQ(saved.code, 0) << from << ": " << saved.err;
      const auto source = dir / from / "step-00000006";
      ASSERT_TRUE(std::filesystem::exists(dir / from / "step-00000003")) << from;

      // A rotation: another policy and another N for every save, each (policy, N) loading once.
      const std::string to_policy = kPolicies[(p + 1) % kPolicies.size()];
      const int to_n = n % 4 + 1;
      const std::string what = from + " -> " + to_policy + "-" + std::to_string(to_n);
      SCOPED_TRACE(what);
      const auto again = dir / (from + "-again");
      // No step is left after step 6 of 6: the loaded state is saved again in the new layout.
      const Output loaded = noeira(dir, tiny_run(dir) + layout(to_policy, to_n) + " --resume " +
                                            source.string() + " --checkpoint-dir " +
                                            again.string() + " --out " +
                                            (dir / (from + "-loaded")).string());
      ASSERT_EQ(loaded.code, 0) << loaded.err;
      const std::string note = "resumed from " + source.string() + " at step 6 (600 samples seen)";
      EXPECT_NE(loaded.out.find(note), std::string::npos) << loaded.out;
      const io::CheckpointReader resaved = io::CheckpointReader::open(again);
      EXPECT_EQ(resaved.dir().filename(), "step-00000006");
      EXPECT_EQ(resaved.meta().world_size, to_n);
      EXPECT_EQ(resaved.meta().policy, to_policy);
      expect_same_logical_state(source, again, what);
      EXPECT_EQ(inspect_tensors(dir, again), inspect_tensors(dir, source));
      std::filesystem::remove_all(dir / (from + "-loaded"));
    }
  }
  // Its size is kept in check by its ctest timeout, not here: a timing assertion fails on a busy
  // machine with nothing wrong (64 s at a load of 9 on 2 cores).
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("checkpoint matrix: %.1f s\n", seconds);
}

// The mid-epoch checkpoint of the matrix's runs, resumed under another layout, continues from the
// same global sample: 3 more steps end within the equivalence tolerance of the uninterrupted run.
TEST(CheckpointMatrix, MidEpochCheckpointContinuesOnAnotherLayout) {
  REQUIRE_BINARY();
  TempDir dir;
  testing::write_tiny_mnist(dir / "data", 600, 100, false);
  const Output full = noeira(dir, tiny_run(dir) + layout("zero3", 3) + " --checkpoint-dir " +
                                      (dir / "ckpt").string() +
                                      " --checkpoint-every 3 --keep-last 0 --out " +
                                      (dir / "full").string());
  ASSERT_EQ(full.code, 0) << full.err;
  const io::CheckpointReader reference = io::CheckpointReader::open(dir / "ckpt" / "step-00000006");
  for (const std::string& target : {layout("ddp", 1), layout("zero1", 4), layout("zero2", 2)}) {
    SCOPED_TRACE(target);
    std::filesystem::remove_all(dir / "more");
    const Output more = noeira(dir, tiny_run(dir) + target + " --resume " +
                                        (dir / "ckpt" / "step-00000003").string() +
                                        " --checkpoint-dir " + (dir / "more").string() +
                                        " --out " + (dir / "more-out").string());
    ASSERT_EQ(more.code, 0) << more.err;
    EXPECT_NE(more.out.find("at step 3 (300 samples seen)"), std::string::npos) << more.out;
    const io::CheckpointReader ended = io::CheckpointReader::open(dir / "more");
    EXPECT_EQ(ended.meta().step, 6);
    EXPECT_EQ(ended.meta().samples_seen, 600);
    EXPECT_EQ(ended.meta().optimizer, reference.meta().optimizer);
    for (const std::string& name : reference.tensor_names()) {
      const std::vector<float> want = reference.read_all(name);
      const std::vector<float> got = ended.read_all(name);
      ASSERT_EQ(got.size(), want.size()) << name;
      double worst = 0.0, scale = 0.0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[i])));
        scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
      }
      EXPECT_LE(worst, 1e-4 * scale + 1e-6) << name;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// SIGKILL at random moments of a run that checkpoints every step.

TEST(CheckpointKill, SigkillAtRandomMomentsLeavesALoadableLatest) {
  REQUIRE_BINARY();
  TempDir dir;
  // 100 samples in 2 steps of 50 per epoch, a checkpoint (about 2.8 MB with m and v) after
  // every step: most of the run's time is spent writing and committing checkpoints.
  testing::write_tiny_mnist(dir / "data", 100, 50, false);
  const std::uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> delay_ms(0, 400);
  const std::vector<std::pair<std::string, int>> layouts = {
      {"ddp", 1}, {"zero1", 2}, {"zero2", 3}, {"zero3", 4}, {"zero3", 2}};
  for (std::size_t trial = 0; trial < layouts.size(); ++trial) {
    const auto& [policy, ranks] = layouts[trial];
    const int delay = delay_ms(rng);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + policy + " on " +
                 std::to_string(ranks) + " ranks, killed " + std::to_string(delay) +
                 " ms after latest names step 2 or later (seed " + std::to_string(seed) + ")");
    const auto ckpt = dir / ("ckpt-" + std::to_string(trial));
    const std::vector<std::string> common = {
        "train", "--data-dir", (dir / "data").string(), "--limit-train", "100", "--limit-test",
        "50", "--batch", "50", "--threads", "1", "--log-every", "0", "--schedule", "constant",
        "--policy", policy, "--sim-ranks", std::to_string(ranks), "--checkpoint-dir",
        ckpt.string(), "--checkpoint-every", "1"};
    std::vector<std::string> args = common;
    for (const char* a : {"--epochs", "5000", "--out"}) args.emplace_back(a);
    args.push_back((dir / ("run-" + std::to_string(trial))).string());  // each run its own
    const pid_t pid = spawn_noeira(dir, args);
    ASSERT_GT(pid, 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (latest_step(ckpt) < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the run ended before the kill: " << slurp(dir / "bg-stderr");

    const std::int64_t step = latest_step(ckpt);
    ASSERT_GE(step, 2);
    const Output inspected = noeira(dir, "inspect " + ckpt.string());
    ASSERT_EQ(inspected.code, 0) << inspected.err;  // inspect reads every tensor's checksums
    EXPECT_NE(inspected.out.find("step " + std::to_string(step) + ", "), std::string::npos)
        << inspected.out;
    const std::string before = inspect_tensors(dir, ckpt);

    // Resumed with as many epochs as the checkpoint completed, no step is left: the loaded
    // state is committed again at the same step, which also clears the killed write's leftovers.
    const std::int64_t samples = io::CheckpointReader::open(ckpt).meta().samples_seen;
    args = common;
    for (const char* a : {"--resume", "latest", "--epochs"}) args.emplace_back(a);
    std::string line;
    for (const std::string& a : args) line += "'" + a + "' ";
    const Output resumed = noeira(dir, line + std::to_string(samples / 100) + " --out " +
                                           (dir / ("resumed-" + std::to_string(trial))).string());
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("at step " + std::to_string(step) + " "), std::string::npos)
        << resumed.out;
    EXPECT_EQ(latest_step(ckpt), step);
    EXPECT_EQ(inspect_tensors(dir, ckpt), before);
    for (const auto& e : std::filesystem::directory_iterator(ckpt)) {
      EXPECT_EQ(e.path().filename().string().rfind(".tmp-", 0), std::string::npos)
          << "leftover of the killed write: " << e.path();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Bad checkpoints through the binary.

class CheckpointBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(NOEIRA_BINARY).empty()) GTEST_SKIP() << "noeira binary not built";
    testing::write_tiny_mnist(dir_ / "data", 200, 50, false);
    const Output o = noeira(dir_, run() + "--epochs 1 --checkpoint-dir " +
                                      (dir_ / "pristine").string() + " --out " +
                                      (dir_ / "out").string());
    ASSERT_EQ(o.code, 0) << o.err;
  }

  // Saved by ZeRO-2 on 3 ranks, loaded by DDP on 2 unless told otherwise.
  std::string run(const std::string& model = "mlp",
                  const std::string& where = "--policy zero2 --sim-ranks 3") const {
    return "train --data-dir " + (dir_ / "data").string() + " --model " + model +
           " --limit-train 200 --limit-test 50 --batch 50 --threads 1 --log-every 0 " + where +
           " ";
  }

  // A fresh copy of the good checkpoint to damage; returns its step directory.
  std::filesystem::path copy(const std::string& name) {
    const auto to = dir_ / name;
    std::filesystem::copy(dir_ / "pristine", to, std::filesystem::copy_options::recursive);
    return to / "step-00000004";
  }

  // --resume (under another layout than the save's) refuses it with one line naming
  // `fragments`, without a signal.
  void expect_resume_refused(const std::filesystem::path& ckpt,
                             const std::vector<std::string>& fragments,
                             const std::string& model = "mlp") {
    const Output o = noeira(dir_, run(model, "--policy ddp --sim-ranks 2") +
                                      "--epochs 2 --resume " + ckpt.string() + " --out " +
                                      (dir_ / "resumed").string());
    EXPECT_LT(o.code, 128) << "--resume ended by signal " << o.code - 128;
    for (const std::string& f : fragments) expect_one_error_line(o, f);
  }

  // Both --resume and inspect refuse it.
  void expect_refused(const std::filesystem::path& ckpt,
                      const std::vector<std::string>& fragments) {
    expect_resume_refused(ckpt, fragments);
    const Output o = noeira(dir_, "inspect " + ckpt.string());
    EXPECT_LT(o.code, 128) << "inspect ended by signal " << o.code - 128;
    for (const std::string& f : fragments) expect_one_error_line(o, f);
  }

  TempDir dir_;
};

TEST_F(CheckpointBadInput, TruncatedRankFileNamesTheFile) {
  const auto step = copy("truncated");
  const auto file = step / "rank-00001.h5";
  const auto size = std::filesystem::file_size(file);
  // Shorter each time: resize_file never grows the file back with zeros.
  for (const std::uintmax_t keep : {size - 1, size / 2, std::uintmax_t{100}, std::uintmax_t{0}}) {
    SCOPED_TRACE("kept " + std::to_string(keep) + " of " + std::to_string(size) + " bytes");
    std::filesystem::resize_file(file, keep);
    expect_refused(step, {file.string()});
  }
}

TEST_F(CheckpointBadInput, FlippedByteIsAChecksumErrorNamingTensorAndFile) {
  const auto step = copy("flipped");
  const std::string tensor = "params/0.weight/m";
  int flipped = 0;
  for (int r = 0; r < 3; ++r) {
    const auto file = step / ("rank-0000" + std::to_string(r) + ".h5");
    const std::int64_t at = data_offset(file, tensor);
    if (at < 0) continue;  // this rank holds no part of it
    flip_byte(file, at + 4 * 1000 + 1);
    expect_refused(step, {file.string(), tensor, "checksum mismatch"});
    flip_byte(file, at + 4 * 1000 + 1);
    ++flipped;
  }
  EXPECT_GT(flipped, 0);
  // The bytes put back, the same checkpoint resumes: the refusals were about the flipped byte.
  const Output ok = noeira(dir_, run() + "--epochs 2 --resume " + step.string() + " --out " +
                                     (dir_ / "ok").string());
  EXPECT_EQ(ok.code, 0) << ok.err;
}

TEST_F(CheckpointBadInput, MissingRankFileNamesItAndTheWorldSize) {
  const auto step = copy("missing");
  std::filesystem::remove(step / "rank-00002.h5");
  expect_refused(step, {(step / "rank-00002.h5").string(), "missing rank file"});
}

TEST_F(CheckpointBadInput, AnotherModelIsRefusedNamingTheParameter) {
  expect_resume_refused(dir_ / "pristine", {"written for another model", "0.weight"}, "linear");
  const Output linear = noeira(dir_, run("linear") + "--epochs 1 --checkpoint-dir " +
                                         (dir_ / "linear").string() + " --out " +
                                         (dir_ / "linear-out").string());
  ASSERT_EQ(linear.code, 0) << linear.err;
  const Output resumed = noeira(dir_, run() + "--epochs 2 --resume " + (dir_ / "linear").string() +
                                          " --out " + (dir_ / "resumed").string());
  EXPECT_LT(resumed.code, 128);
  expect_one_error_line(resumed, "written for another model");
  expect_one_error_line(resumed, (dir_ / "linear" / "step-00000004").string());
}

TEST_F(CheckpointBadInput, HalfWrittenCheckpointIsRefused) {
  const auto step = copy("half");
  const auto tmp = step.parent_path() / ".tmp-step-00000008";
  std::filesystem::rename(step, tmp);
  expect_refused(tmp, {tmp.string()});
}

}  // namespace
}  // namespace noeira
