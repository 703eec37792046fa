// Nothing of another run is touched and a refused run leaves nothing behind (train/run_files.hpp):
// an --out that holds a run is refused with that run's files intact, a run refused after its
// directories were claimed removes them, --overwrite-checkpoints discards nothing for a run that
// is refused, and a resumed run continues its own records. A resume on other data of the same
// size and an --init-from of another vocabulary are refused. A default never fails a run: the
// ones the user did not set adapt to the ones the user did. And an error is one short line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_test_util.hpp"
#include "io_test_files.hpp"

namespace noeira {
namespace {

using testing::Output;
using testing::TempDir;
using testing::expect_one_error_line;
using testing::latest_step;
using testing::noeira;
using testing::slurp;

// 60 samples in 3 steps of 20 per epoch, evaluated on 20: each run takes well under a second.
std::string tiny_run(const TempDir& dir, int epochs = 1) {
  testing::write_tiny_mnist(dir / "data", 60, 20, false);
  return "train --data-dir " + (dir / "data").string() + " --batch 20 --limit-test 20 --epochs " +
         std::to_string(epochs) + " --threads 1 --log-every 1 ";
}

// A corpus of 400 lines; `reversed` writes the same lines in the other order (the same size and
// characters, other data); `extra` starts the training text with characters the others lack.
std::string write_corpus(const TempDir& dir, const std::string& name, bool reversed = false,
                         const std::string& extra = "") {
  const std::filesystem::path file = dir / name;
  std::ofstream out(file);
  out << extra;
  for (int k = 0; k < 400; ++k) {
    const int i = reversed ? 399 - k : k;
    out << "a stitch in time saves nine, line " << i % 13 << "\n";
  }
  return file.string();
}

std::string text_run(const std::string& corpus) {
  return "train --data text --model gpt-tiny --text-file " + corpus +
         " --eval-batches 1 --threads 1 ";
}

TEST(CliNothingLost, OutHoldingAnotherRunIsRefusedAndKeepsItsFiles) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string run = tiny_run(dir);
  const std::filesystem::path first = dir / "first";
  ASSERT_EQ(noeira(dir, run + "--out " + first.string()).code, 0);
  const std::string config = slurp(first / "config.json");
  const std::string metrics = slurp(first / "metrics.jsonl");
  const std::string model = slurp(first / "model.h5");
  ASSERT_FALSE(metrics.empty());

  // Refused whether the run would then succeed or fail later (here: another batch, and a
  // resume of a checkpoint that does not exist).
  expect_one_error_line(noeira(dir, run + "--limit-train 40 --out " + first.string()),
                        "--out " + first.string() + ": holds another run's records (");
  expect_one_error_line(noeira(dir, run + "--resume " + (dir / "none").string() + " --out " +
                                        first.string()),
                        "--out " + first.string());
  EXPECT_EQ(slurp(first / "config.json"), config);
  EXPECT_EQ(slurp(first / "metrics.jsonl"), metrics);
  EXPECT_EQ(slurp(first / "model.h5"), model);

  // Any one of the records is another run's; other files are left alone beside a new run's.
  for (const char* record : {"config.json", "metrics.jsonl", "model.h5"}) {
    const std::filesystem::path other = dir / (std::string("other-") + record);
    std::filesystem::create_directories(other);
    std::ofstream(other / record) << "theirs\n";
    expect_one_error_line(noeira(dir, run + "--out " + other.string()),
                          "holds another run's records (" + std::string(record) + ")");
    EXPECT_EQ(slurp(other / record), "theirs\n");
  }
  std::filesystem::create_directories(dir / "mine");
  std::ofstream(dir / "mine" / "notes.txt") << "keep me\n";
  const Output mine = noeira(dir, run + "--out " + (dir / "mine").string());
  EXPECT_EQ(mine.code, 0) << mine.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "mine" / "model.h5"));
  EXPECT_EQ(slurp(dir / "mine" / "notes.txt"), "keep me\n");
}

TEST(CliNothingLost, ARunRefusedAfterItsClaimLeavesNothingBehind) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string run = tiny_run(dir);
  const std::string ckpt = " --checkpoint-dir " + (dir / "ckpt").string();
  ASSERT_EQ(noeira(dir, run + ckpt + " --out " + (dir / "first").string()).code, 0);
  ASSERT_EQ(latest_step(dir / "ckpt"), 3);

  // Refused while loading the checkpoint, after the output directory was claimed: neither it
  // nor its new parents are left.
  const Output refused = noeira(dir, run + "--limit-train 40 --resume latest" + ckpt +
                                         " --out " + (dir / "new" / "deeper").string());
  expect_one_error_line(refused, "limit-train");
  EXPECT_FALSE(std::filesystem::exists(dir / "new"));

  // A new checkpoint directory is removed with it; a refused --overwrite-checkpoints discards
  // nothing.
  const std::string taken = " --out " + (dir / "first").string();  // another run's records
  expect_one_error_line(
      noeira(dir, run + "--checkpoint-dir " + (dir / "c2" / "c").string() + taken),
      "holds another run's records");
  EXPECT_FALSE(std::filesystem::exists(dir / "c2"));
  expect_one_error_line(noeira(dir, run + "--limit-train 40 --overwrite-checkpoints" + ckpt +
                                        taken),
                        "holds another run's records");
  EXPECT_EQ(latest_step(dir / "ckpt"), 3);
  EXPECT_TRUE(std::filesystem::exists(dir / "ckpt" / "step-00000003"));
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  }
}

TEST(CliNothingLost, AResumedRunContinuesItsOwnRecords) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string run = tiny_run(dir);
  const std::string ckpt = " --checkpoint-dir " + (dir / "ckpt").string();
  const std::filesystem::path out = dir / "run";
  ASSERT_EQ(noeira(dir, run + ckpt + " --out " + out.string()).code, 0);
  const std::string first = slurp(out / "metrics.jsonl");
  const Output resumed =
      noeira(dir, tiny_run(dir, 2) + "--resume latest" + ckpt + " --out " + out.string());
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  const std::string both = slurp(out / "metrics.jsonl");
  EXPECT_EQ(both.rfind(first, 0), 0u) << "the first run's records were not kept";
  EXPECT_GT(both.size(), first.size());
  EXPECT_NE(slurp(out / "config.json").find("\"epochs\": 2"), std::string::npos);
}

TEST(CliNothingLost, AResumeOnOtherDataOfTheSameSizeIsRefused) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string ckpt = " --checkpoint-dir " + (dir / "ckpt").string();
  const std::string same = write_corpus(dir, "a.txt");
  const std::string shuffled = write_corpus(dir, "b.txt", /*reversed=*/true);
  const std::string steps = "--steps 4 --eval-every 2 --checkpoint-every 2 ";
  const Output first = noeira(dir, text_run(same) + steps + ckpt + " --out " +
                                       (dir / "first").string());
  ASSERT_EQ(first.code, 0) << first.err;
  expect_one_error_line(noeira(dir, text_run(shuffled) + "--steps 6 --eval-every 2 --resume "
                                        "latest" + ckpt + " --out " + (dir / "b").string()),
                        ": saved by a run on other data (hash ");
  const Output resumed = noeira(dir, text_run(same) + "--steps 6 --eval-every 2 --resume "
                                         "latest" + ckpt + " --out " + (dir / "a").string());
  EXPECT_EQ(resumed.code, 0) << resumed.err;
}

TEST(CliNothingLost, InitFromAnotherVocabularyNeedsItsFlag) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string corpus = write_corpus(dir, "a.txt");
  const std::string wider = write_corpus(dir, "b.txt", false, "Z\n");
  const std::string steps = "--steps 2 --eval-every 2 ";
  ASSERT_EQ(noeira(dir, text_run(corpus) + steps + "--out " + (dir / "a").string()).code, 0);
  const std::string from = " --init-from " + (dir / "a" / "model.h5").string();
  expect_one_error_line(
      noeira(dir, text_run(wider) + steps + from + " --out " + (dir / "b").string()),
      "trained on another vocabulary (char, ");
  EXPECT_FALSE(std::filesystem::exists(dir / "b"));
  const Output meant = noeira(dir, text_run(wider) + steps + from + " --new-vocabulary --out " +
                                       (dir / "c").string());
  EXPECT_EQ(meant.code, 0) << meant.err;
  const Output same =
      noeira(dir, text_run(corpus) + steps + from + " --out " + (dir / "d").string());
  EXPECT_EQ(same.code, 0) << same.err;
  expect_one_error_line(noeira(dir, text_run(corpus) + steps + "--new-vocabulary"),
                        "--new-vocabulary applies to --init-from");
}

// The defaults a user did not set never fail a run; what the user did set is refused in the
// flags' own words, before anything is loaded (a missing corpus is not reached).
TEST(CliNothingLost, DefaultsAdaptToWhatTheUserSet) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string corpus = write_corpus(dir, "a.txt");
  auto ok = [&](const std::string& flags, const std::string& expected) {
    const Output o = noeira(dir, text_run(corpus) + flags + " --out " +
                                     (dir / std::to_string(std::hash<std::string>{}(flags)))
                                         .string());
    EXPECT_EQ(o.code, 0) << flags << ": " << o.err;
    EXPECT_NE(o.out.find(expected), std::string::npos) << flags << ": " << o.out;
  };
  ok("--steps 20", "eval 1/1");                 // the interval shortens to the run
  ok("--steps 300 --log-every 0", "eval 2/2");  // 150 divides 300, 250 does not
  ok("--steps 2 --lr 5e-5", "lr 5e-05");        // the schedule's floor follows the rate down
  ok("--steps 2 --sim-ranks 16", "16 ranks");   // the batch grows to cover the ranks

  const std::string missing = text_run((dir / "missing.txt").string());
  expect_one_error_line(noeira(dir, missing + "--steps 20 --warmup 50"),
                        "--warmup 50 is not shorter than the run's 20 steps");
  expect_one_error_line(noeira(dir, missing + "--lr 1e-4 --min-lr 1e-3"),
                        "--min-lr 0.001 is above --lr 0.0001");
  expect_one_error_line(noeira(dir, missing + "--steps 20 --eval-every 7"),
                        "--eval-every 7 does not divide --steps 20");
}

// A message quoting a huge value stays one line of bounded length, its start and end kept.
TEST(CliNothingLost, AHugeValueKeepsTheErrorLineShort) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string huge = "start" + std::string(100'000, 'x') + "end";
  for (const std::string flag : {"--model", "--data-dir", "--text-file"}) {
    const Output o = noeira(dir, "train --data text " + flag + " " + huge);
    expect_one_error_line(o, " bytes not shown) ... ");
    EXPECT_LT(o.err.size(), 1200u) << flag;
    EXPECT_NE(o.err.find("start"), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace noeira
