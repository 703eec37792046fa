// Numeric flags out of what makes sense, and words that are no subcommand: each is refused before
// any data is read, in one short line that names the flag and what it may be (issue 17, cases 9
// and 10). Before, some overflowed or wrapped into a silently wrong run, others printed an
// internal assertion, "lr = inf" or DBL_MAX in 309 digits.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cli_test_util.hpp"

namespace noeira {
namespace {

using testing::Output;
using testing::TempDir;
using testing::expect_one_error_line;
using testing::noeira;

// One line that names the flag and the allowed range, short enough to read.
void expect_refused(const TempDir& dir, const std::string& args, const std::string& fragment) {
  SCOPED_TRACE(args);
  const Output o = noeira(dir, args);
  expect_one_error_line(o, fragment);
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_LT(o.err.size(), 160u) << o.err;
}

TEST(CliLimits, CountsBeyondAnyRunAreRefused) {
  REQUIRE_BINARY();
  TempDir dir;
  expect_refused(dir, "eval --eval-batch 9223372036854775807",
                 "--eval-batch: must be a whole number from 1 to 1000000, got '9223372036854775807'");
  expect_refused(dir, "train --epochs 9223372036854775800", "--epochs: must be a whole number");
  expect_refused(dir, "train --epochs 99999999999999999999", "--epochs");
  expect_refused(dir, "train --batch 2.5", "--batch");
  expect_refused(dir, "train --steps 1e12 --data text", "--steps");
  expect_refused(dir, "train --sim-ranks 100000", "--sim-ranks");
  expect_refused(dir, "generate --tokens 9223372036854775807", "--tokens");
  // A config file's values run through the same checks.
  std::ofstream(dir / "big.json") << R"({"epochs": 1e30})";
  const Output o = noeira(dir, "train --config " + (dir / "big.json").string());
  expect_one_error_line(o, "--epochs: must be a whole number");
}

TEST(CliLimits, NumbersAreCheckedInTheUsersTerms) {
  REQUIRE_BINARY();
  TempDir dir;
  expect_refused(dir, "train --watchdog-timeout 0.0004",
                 "--watchdog-timeout: must be a number from 0.001 to 1e+06, got '0.0004'");
  expect_refused(dir, "train --lr 1e39", "--lr: must be a number from 1e-12 to 1e+30, got '1e39'");
  expect_refused(dir, "train --lr 1e-50", "--lr: must be a number from 1e-12");
  expect_refused(dir, "train --lr -1e300", "--lr: must be a number from 1e-12 to 1e+30");
  expect_refused(dir, "train --lr nan", "--lr");
  expect_refused(dir, "train --beta2 1", "--beta2");
  expect_refused(dir, "train --seed -1",
                 "--seed: must be a whole number from 0 to 18446744073709551615, got '-1'");
  expect_refused(dir, "train --seed 1e23", "--seed: must be a whole number");
  expect_refused(dir, "train --lr " + std::string(400, '9'), "got '99999999999999999999999999999999...'");
}

TEST(CliLimits, AnUnknownSubcommandIsNamed) {
  REQUIRE_BINARY();
  TempDir dir;
  expect_refused(dir, "trian --epochs 1",
                 "unknown subcommand 'trian' (one of train, eval, generate, inspect, export, plot, "
                 "tokenize;");
  expect_one_error_line(noeira(dir, ""), "A subcommand is required");
}

}  // namespace
}  // namespace noeira
