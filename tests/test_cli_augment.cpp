// `noeira train --augment` end to end: a CIFAR-10 directory in the binary format trains with
// crop-flip by default, recorded in config.json and the run header; a crop-flip run on 28x28
// images is the one-rank run on three simulated ranks, differs from the unaugmented run, and
// resumes bit for bit inside its second epoch; the flags are image-only and range-checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
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
using testing::slurp;

std::vector<double> train_losses(const std::filesystem::path& metrics) {
  std::vector<double> losses;
  for (const nlohmann::json& j : testing::metrics_records(metrics, "epoch")) {
    losses.push_back(j["train_loss"].get<double>());
  }
  return losses;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  }
  return worst;
}

TEST(CliAugment, Cifar10TrainsWithCropFlipByDefault) {
  REQUIRE_BINARY();
  TempDir dir;
  testing::write_tiny_cifar(dir / "data", 8, 20);
  const std::string run = "train --data cifar10 --model mlp-cifar --data-dir " +
                          (dir / "data").string() +
                          " --epochs 2 --batch 10 --threads 2 --log-every 1 --out ";
  const Output augmented = noeira(dir, run + (dir / "augmented").string());
  ASSERT_EQ(augmented.code, 0) << augmented.err;
  EXPECT_NE(augmented.out.find("training images crop-flip (padding 4)"), std::string::npos)
      << augmented.out;
  const nlohmann::json config = nlohmann::json::parse(slurp(dir / "augmented" / "config.json"));
  EXPECT_EQ(config["augment"], "crop-flip");
  EXPECT_EQ(config["crop-padding"], 4);
  const std::vector<double> losses = train_losses(dir / "augmented" / "metrics.jsonl");
  ASSERT_EQ(losses.size(), 2u);
  for (double loss : losses) EXPECT_TRUE(std::isfinite(loss)) << loss;

  const Output plain = noeira(dir, run + (dir / "plain").string() + " --augment none");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("crop-flip"), std::string::npos) << plain.out;
  EXPECT_NE(train_losses(dir / "plain" / "metrics.jsonl"), losses);
}

// 60 images in batches of 10: 6 steps an epoch, 2 epochs; step 8 is inside the second epoch,
// whose draws differ from the first's.
const std::string kRun = " --epochs 2 --batch 10 --threads 1 --log-every 0 ";

TEST(CliAugment, CropFlipIsTheSameOnAnyRankCountAndResumesExactly) {
  REQUIRE_BINARY();
  TempDir dir;
  testing::write_tiny_mnist(dir / "data", 60, 20, false);
  const std::string plain_run = "train --data-dir " + (dir / "data").string() + kRun;
  const std::string run = plain_run + "--augment crop-flip ";
  const Output one = noeira(dir, run + "--checkpoint-dir " + (dir / "ckpt").string() +
                                     " --checkpoint-every 4 --keep-last 0 --out " +
                                     (dir / "one").string());
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.out.find("training images crop-flip (padding 2)"), std::string::npos) << one.out;
  const std::vector<float> reference = saved_mlp(dir / "one" / "model.h5");
  double max_p = 0.0;
  for (float p : reference) max_p = std::max(max_p, static_cast<double>(std::fabs(p)));
  const double tol = 1e-4 * max_p + 1e-6;

  const Output three = noeira(dir, run + "--sim-ranks 3 --out " + (dir / "three").string());
  ASSERT_EQ(three.code, 0) << three.err;
  EXPECT_LE(max_abs_difference(saved_mlp(dir / "three" / "model.h5"), reference), tol);

  // Not vacuous: without augmentation the run ends elsewhere.
  const Output plain = noeira(dir, plain_run + "--out " + (dir / "plain").string());
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_GT(max_abs_difference(saved_mlp(dir / "plain" / "model.h5"), reference), 100 * tol);

  const Output resumed = noeira(dir, run + "--resume " + (dir / "ckpt" / "step-00000008").string() +
                                         " --checkpoint-dir " + (dir / "ckpt2").string() +
                                         " --out " + (dir / "resumed").string());
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resumed from"), std::string::npos) << resumed.out;
  EXPECT_EQ(saved_mlp(dir / "resumed" / "model.h5"), reference);
}

TEST(CliAugment, FlagsAreForImagesAndRangeChecked) {
  REQUIRE_BINARY();
  TempDir dir;
  const Output help = noeira(dir, "train --help");
  EXPECT_NE(help.out.find("--augment TEXT:{none,crop-flip}=none"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--crop-padding INT:[0..1024]=2"), std::string::npos) << help.out;
  expect_one_error_line(noeira(dir, "train --augment mixup"), "--augment");
  expect_one_error_line(noeira(dir, "train --crop-padding -1"), "--crop-padding");
  expect_one_error_line(noeira(dir, "train --data text --augment crop-flip"),
                        "--augment does not apply to --data text");
}

}  // namespace
}  // namespace noeira
