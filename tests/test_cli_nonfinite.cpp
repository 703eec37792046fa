// Numbers that go non-finite (issue 17, case 3), end to end with the noeira binary: a run that
// diverges stops with an error naming the step and what went non-finite, writes no model.h5 and
// no checkpoint of it (the last good one stays `latest`), and eval refuses a non-finite model
// file unless --allow-non-finite.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "core/finite.hpp"
#include "io_test_files.hpp"

namespace noeira {
namespace {

using testing::Output;
using testing::TempDir;
using testing::expect_one_error_line;
using testing::latest_step;
using testing::noeira;

// 60 samples in 6 steps of 10: SGD at lr 1e30 overflows within them.
std::string tiny_run(const TempDir& dir) {
  testing::write_tiny_mnist(dir / "data", 60, 20, false);
  return "train --data-dir " + (dir / "data").string() +
         " --batch 10 --limit-test 20 --threads 1 --optimizer sgd --schedule constant ";
}

TEST(CliNonFinite, DivergedRunStopsNamingTheStepAndSavesNothing) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string run = tiny_run(dir);
  // Found where the loss comes to the host anyway: the end of the epoch, or a logged step.
  Output o = noeira(dir, run + "--lr 1e30 --epochs 1 --log-every 0 --out " +
                             (dir / "epoch").string());
  expect_one_error_line(o, "step 6: non-finite training loss (");
  expect_one_error_line(o, ") in steps 1-6; no model.h5 written");
  EXPECT_FALSE(std::filesystem::exists(dir / "epoch" / "model.h5"));
  o = noeira(dir, run + "--lr 1e30 --epochs 1 --log-every 1 --out " + (dir / "logged").string());
  expect_one_error_line(o, "non-finite");
  EXPECT_EQ(o.err.find("step 6:"), std::string::npos) << "a logged step finds it sooner: " << o.err;

  // With checkpoints: the good one stays latest, and none of the diverged state is written.
  const std::string ckpt = " --checkpoint-dir " + (dir / "ckpt").string();
  const Output good = noeira(dir, run + "--lr 0.01 --epochs 1 --log-every 0" + ckpt + " --out " +
                                      (dir / "good").string());
  ASSERT_EQ(good.code, 0) << good.err;
  ASSERT_EQ(latest_step(dir / "ckpt"), 6);
  o = noeira(dir, run + "--lr 1e30 --epochs 2 --log-every 0 --resume latest" + ckpt + " --out " +
                      (dir / "diverged").string());
  expect_one_error_line(o, "step 12: non-finite training loss (");
  expect_one_error_line(o, "no model.h5 or checkpoint written (latest: step-00000006)");
  EXPECT_EQ(latest_step(dir / "ckpt"), 6);
  EXPECT_FALSE(std::filesystem::exists(dir / "diverged" / "model.h5"));
  for (const auto& e : std::filesystem::directory_iterator(dir / "ckpt")) {
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
  }
  // A checkpoint right after the step that overflowed the parameters is refused by name.
  o = noeira(dir, run + "--lr 1e30 --epochs 2 --log-every 0 --checkpoint-every 1 "
                      "--resume latest" + ckpt + " --out " + (dir / "every").string());
  expect_one_error_line(o, ": non-finite ");
  EXPECT_GE(latest_step(dir / "ckpt"), 6);
  const Output inspected = noeira(dir, "inspect " + (dir / "ckpt").string());
  EXPECT_EQ(inspected.code, 0) << inspected.err;
  EXPECT_EQ(inspected.out.find("nan"), std::string::npos) << inspected.out;
}

TEST(CliNonFinite, NonFiniteParametersAreRefusedOnLoadUnlessAllowed) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string run = tiny_run(dir);
  // Told to, the diverged run goes on and saves what it has: a model of NaNs.
  const Output o = noeira(dir, run + "--lr 1e30 --epochs 1 --log-every 1 --allow-non-finite " +
                                   "--out " + (dir / "nan").string());
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string model = (dir / "nan" / "model.h5").string();
  const std::string data = " --data-dir " + (dir / "data").string() + " --limit-test 20";
  expect_one_error_line(noeira(dir, "eval --params " + model + data),
                        model + ": parameter '0.weight': non-finite value (");
  expect_one_error_line(noeira(dir, "eval --params " + model + data), "--allow-non-finite");
  const Output allowed = noeira(dir, "eval --allow-non-finite --params " + model + data);
  EXPECT_EQ(allowed.code, 0) << allowed.err;
}

TEST(NonFinite, FirstNonFiniteFindsNanAndInfinities) {
  const std::vector<float> fine = {0.0f, -1.0f, 3e38f};
  EXPECT_FALSE(first_non_finite(fine));
  const std::vector<float> bad = {1.0f, INFINITY, NAN};
  EXPECT_EQ(first_non_finite(bad), 1u);
  EXPECT_EQ(non_finite_name(-INFINITY), "-inf");
  EXPECT_THROW(refuse_non_finite(bad, NonFinite::Refuse, "x", "save"), InputError);
  EXPECT_NO_THROW(refuse_non_finite(bad, NonFinite::Allow, "x", "save"));
}

}  // namespace
}  // namespace noeira
