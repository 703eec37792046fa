// resnet20 through the binary, on a tiny data directory the test writes itself: a run takes the
// preset's defaults (AdamW, weight decay, random crops and flips, 15 epochs: the recipe that
// reaches 93 % on Fashion-MNIST) for every flag left unset, and the user's value for every flag
// given.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_test_util.hpp"
#include "io_test_files.hpp"

namespace noeira {
namespace {

using testing::Output;
using testing::TempDir;
using testing::noeira;
using testing::slurp;

nlohmann::json config_of_run(const TempDir& dir, const std::string& name,
                             const std::string& flags) {
  const std::string run = (dir / name).string();
  const Output o = noeira(dir, "train --model resnet20 --data-dir " + (dir / "data").string() +
                                   " --threads 1 --log-every 0 --log-format json --out " + run +
                                   " " + flags);
  EXPECT_EQ(o.code, 0) << o.err;
  return nlohmann::json::parse(slurp(dir / name / "config.json"));
}

TEST(CliResnet, TrainsWithThePresetsDefaultsWhereNoFlagIsGiven) {
  REQUIRE_BINARY();
  TempDir dir;
  testing::write_tiny_mnist(dir / "data", 24, 8, false);
  const nlohmann::json preset = config_of_run(dir, "preset", "--epochs 1");
  EXPECT_EQ(preset["model"], "resnet20");
  EXPECT_EQ(preset["optimizer"], "adamw");
  EXPECT_DOUBLE_EQ(preset["weight-decay"].get<double>(), 0.05);
  EXPECT_EQ(preset["augment"], "crop-flip");
  EXPECT_EQ(preset["epochs"], 1);  // given: the flag wins

  const nlohmann::json given = config_of_run(
      dir, "given", "--epochs 1 --optimizer adam --weight-decay 0 --augment none");
  EXPECT_EQ(given["optimizer"], "adam");
  EXPECT_DOUBLE_EQ(given["weight-decay"].get<double>(), 0.0);
  EXPECT_EQ(given["augment"], "none");
}

}  // namespace
}  // namespace noeira
