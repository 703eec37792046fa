// vit-tiny through the binary, on a tiny data directory the test writes itself: a run takes the
// preset's defaults (AdamW, weight decay, clipping) for every flag left unset and the
// user's value for every flag given, eval of its model.h5 agrees with its last evaluation, and the
// preset on text is one error line about the data, not about the flags the preset set.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "io_test_files.hpp"

namespace noeira {
namespace {

using testing::Output;
using testing::TempDir;
using testing::noeira;
using testing::slurp;

TEST(CliVit, TrainsWithThePresetsDefaultsWhereNoFlagIsGiven) {
  REQUIRE_BINARY();
  TempDir dir;
  testing::write_tiny_mnist(dir / "data", 120, 40, false);
  const std::string run = (dir / "run").string();
  const Output o = noeira(dir, "train --model vit-tiny --data-dir " + (dir / "data").string() +
                                   " --epochs 1 --lr 3e-3 --threads 1 --log-every 0 "
                                   "--log-format json --out " + run);
  ASSERT_EQ(o.code, 0) << o.err;
  const nlohmann::json cfg = nlohmann::json::parse(slurp(dir / "run" / "config.json"));
  EXPECT_EQ(cfg["model"], "vit-tiny");
  EXPECT_EQ(cfg["optimizer"], "adamw");  // the preset's
  EXPECT_DOUBLE_EQ(cfg["weight-decay"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(cfg["grad-clip"].get<double>(), 1.0);
  EXPECT_EQ(cfg["batch"], 64);
  EXPECT_EQ(cfg["epochs"], 1);  // given: the flag wins
  EXPECT_DOUBLE_EQ(cfg["lr"].get<double>(), 3e-3);

  std::vector<nlohmann::json> records;
  std::ifstream in(dir / "run" / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  ASSERT_FALSE(records.empty());
  const nlohmann::json& last = records.back();
  // With the training's threads: OpenBLAS's AVX2 kernels round a row of a product differently
  // with the rows each thread gets.
  const Output e = noeira(dir, "eval --params " + run + "/model.h5 --data-dir " +
                                   (dir / "data").string() + " --threads 1 --log-format json");
  ASSERT_EQ(e.code, 0) << e.err;
  const nlohmann::json ev = nlohmann::json::parse(e.out);
  EXPECT_EQ(ev["test_accuracy"].get<double>(), last["test_accuracy"].get<double>());
  EXPECT_DOUBLE_EQ(ev["test_loss"].get<double>(), last["test_loss"].get<double>());
}

TEST(CliVit, OnTextIsOneLineAboutTheData) {
  REQUIRE_BINARY();
  TempDir dir;
  std::ofstream(dir / "corpus.txt") << "some text to model\n";
  testing::expect_one_error_line(
      noeira(dir, "train --data text --model vit-tiny --text-file " +
                      (dir / "corpus.txt").string()),
      "model 'vit-tiny' classifies images");
}

}  // namespace
}  // namespace noeira
