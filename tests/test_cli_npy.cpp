// `noeira train --data npy` end to end: a user's arrays in .npy files train the presets. The
// property: the same images given as the floats noeira's own loader feeds the model train bit for
// bit as the IDX files do (two simulated ranks under ZeRO-3), and the saved model evaluates; and
// every way the arrays can be wrong is one line naming the file (and the sample), before training.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "io_test_files.hpp"
#include "saved_params.hpp"
#include "train/batch.hpp"
#include "train/dataset.hpp"

namespace noeira {
namespace {

using testing::Output;
using testing::TempDir;
using testing::expect_one_error_line;
using testing::noeira;
using testing::saved_mlp;
using testing::write_npy_array;

// The losses of the metrics file's epoch lines, train and test, in order.
std::vector<double> epoch_losses(const std::filesystem::path& metrics) {
  std::vector<double> losses;
  for (const nlohmann::json& j : testing::metrics_records(metrics, "epoch")) {
    losses.push_back(j["train_loss"].get<double>());
    losses.push_back(j["test_loss"].get<double>());
  }
  return losses;
}

// A split of the MNIST-layout files in `idx` written as <split>_x.npy (float32 [N, 1, 28, 28], the
// model's inputs exactly as the loader normalizes them) and <split>_y.npy (int64 [N]).
void write_split_as_floats(const std::filesystem::path& idx, Split split,
                           const std::filesystem::path& out, const std::string& name) {
  const ResidentData data =
      make_resident(load_dataset(DatasetKind::Mnist, idx, split), Target::Cpu);
  Batch batch;
  gather_batch(batch, data, Tensor(), RowRange{0, data.count});
  const std::vector<std::int32_t> labels = batch.labels.to_host<std::int32_t>();
  write_npy_array(out / (name + "_x.npy"), "<f4", {data.count, 1, 28, 28}, batch.x.to_vector());
  write_npy_array(out / (name + "_y.npy"), "<i8", {data.count},
                  std::vector<std::int64_t>(labels.begin(), labels.end()));
}

// Tiny well-formed arrays: `count` samples of `width` features, labels k % 10.
void write_arrays(const std::filesystem::path& dir, const std::string& split, std::int64_t count,
                  std::int64_t width) {
  std::filesystem::create_directories(dir);
  std::vector<float> x(static_cast<std::size_t>(count * width));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  std::vector<std::int64_t> y(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int64_t>(i % 10);
  write_npy_array(dir / (split + "_x.npy"), "<f4", {count, width}, x);
  write_npy_array(dir / (split + "_y.npy"), "<i8", {count}, y);
}

TEST(CliNpy, FloatArraysTrainBitForBitAsTheImagesTheyHold) {
  REQUIRE_BINARY();
  TempDir dir;
  testing::write_tiny_mnist(dir / "idx", 40, 20, false);
  std::filesystem::create_directories(dir / "npy");
  write_split_as_floats(dir / "idx", Split::Train, dir / "npy", "train");
  write_split_as_floats(dir / "idx", Split::Test, dir / "npy", "test");
  const std::string common =
      " --model mlp --epochs 2 --batch 10 --threads 1 --sim-ranks 2 --policy zero3 --out ";
  const Output images =
      noeira(dir, "train --data mnist --data-dir " + (dir / "idx").string() + common +
                      (dir / "images").string());
  ASSERT_EQ(images.code, 0) << images.err;
  const Output arrays = noeira(dir, "train --data npy --data-dir " + (dir / "npy").string() +
                                        common + (dir / "arrays").string());
  ASSERT_EQ(arrays.code, 0) << arrays.err;
  EXPECT_NE(arrays.out.find("npy 40 train / 20 test samples from"), std::string::npos)
      << arrays.out;

  const std::vector<double> expected = epoch_losses(dir / "images" / "metrics.jsonl");
  ASSERT_EQ(expected.size(), 4u);
  EXPECT_EQ(epoch_losses(dir / "arrays" / "metrics.jsonl"), expected);
  EXPECT_EQ(saved_mlp(dir / "arrays" / "model.h5"), saved_mlp(dir / "images" / "model.h5"));

  // The saved model describes its data and evaluates on it: the test loss training last logged.
  const Output eval = noeira(dir, "eval --params " + (dir / "arrays" / "model.h5").string() +
                                      " --data npy --data-dir " + (dir / "npy").string());
  ASSERT_EQ(eval.code, 0) << eval.err;
  EXPECT_NE(eval.out.find("20 samples"), std::string::npos) << eval.out;
}

TEST(CliNpy, AnImagePresetsAugmentationGivesWayToArrays) {
  REQUIRE_BINARY();
  TempDir dir;
  write_arrays(dir / "npy", "train", 8, 784);
  write_arrays(dir / "npy", "test", 4, 784);
  // resnet20 defaults to crop-flip on images; arrays have no image to crop.
  const Output o = noeira(dir, "train --data npy --data-dir " + (dir / "npy").string() +
                                   " --model resnet20 --epochs 1 --batch 4 --threads 2 --out " +
                                   (dir / "run").string());
  ASSERT_EQ(o.code, 0) << o.err;
  const nlohmann::json config = nlohmann::json::parse(testing::slurp(dir / "run" / "config.json"));
  EXPECT_EQ(config["augment"], "none");
  // Asked for by the user, it is refused.
  expect_one_error_line(noeira(dir, "train --data npy --data-dir " + (dir / "npy").string() +
                                        " --model mlp --augment crop-flip --out " +
                                        (dir / "refused").string()),
                        "--augment crop-flip does not apply to --data npy");
}

// Regression arrays: `count` samples of 784 features in [-1, 1), targets [count, 10] a linear
// function of the first features.
std::vector<float> write_regression(const std::filesystem::path& dir, const std::string& split,
                                    std::int64_t count, std::uint32_t seed) {
  std::filesystem::create_directories(dir);
  std::vector<float> x(static_cast<std::size_t>(count * 784));
  std::uint32_t state = seed;
  for (float& v : x) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  }
  std::vector<float> y(static_cast<std::size_t>(count * 10));
  for (std::int64_t i = 0; i < count; ++i) {
    for (std::int64_t c = 0; c < 10; ++c) {
      y[i * 10 + c] = 0.5f * x[i * 784 + c] - 0.25f * x[i * 784 + c + 10] + 0.1f;
    }
  }
  write_npy_array(dir / (split + "_x.npy"), "<f4", {count, 784}, x);
  write_npy_array(dir / (split + "_y.npy"), "<f4", {count, 10}, y);
  return y;
}

TEST(CliNpy, FloatTargetsTrainARegressionThatReportsRmseAndR2) {
  REQUIRE_BINARY();
  TempDir dir;
  write_regression(dir / "npy", "train", 64, 1);
  const std::vector<float> test_y = write_regression(dir / "npy", "test", 32, 2);
  const Output o = noeira(dir, "train --data npy --data-dir " + (dir / "npy").string() +
                                   " --model mlp --epochs 4 --batch 16 --lr 3e-3 --threads 1 "
                                   "--out " + (dir / "run").string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("(regression of 10 targets)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(" r2 "), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("test acc"), std::string::npos) << o.out;

  // R² is 1 - Σ squared errors / Σ (y - column mean)², the errors summing to loss · 32 · 10.
  double spread = 0.0;
  for (int c = 0; c < 10; ++c) {
    double mean = 0.0;
    for (int i = 0; i < 32; ++i) mean += test_y[i * 10 + c];
    mean /= 32.0;
    for (int i = 0; i < 32; ++i) spread += (test_y[i * 10 + c] - mean) * (test_y[i * 10 + c] - mean);
  }
  const std::vector<nlohmann::json> epochs =
      testing::metrics_records(dir / "run" / "metrics.jsonl", "epoch");
  ASSERT_EQ(epochs.size(), 4u);
  for (const nlohmann::json& e : epochs) {
    const double loss = e["test_loss"].get<double>();
    EXPECT_FALSE(e.contains("test_accuracy")) << e.dump();
    EXPECT_DOUBLE_EQ(e["test_rmse"].get<double>(), std::sqrt(loss)) << e.dump();
    EXPECT_NEAR(e["test_r2"].get<double>(), 1.0 - loss * 320.0 / spread, 1e-9) << e.dump();
  }
  EXPECT_LT(epochs.back()["test_loss"].get<double>(), epochs.front()["test_loss"].get<double>());

  // The saved model evaluates to the last epoch's figures.
  const Output eval = noeira(dir, "eval --log-format json --params " +
                                      (dir / "run" / "model.h5").string() +
                                      " --data npy --data-dir " + (dir / "npy").string());
  ASSERT_EQ(eval.code, 0) << eval.err;
  const nlohmann::json j = nlohmann::json::parse(eval.out);
  EXPECT_EQ(j["test_loss"], epochs.back()["test_loss"]) << eval.out;
  EXPECT_EQ(j["test_r2"], epochs.back()["test_r2"]) << eval.out;
  EXPECT_FALSE(j.contains("test_accuracy")) << eval.out;
}

struct BadArrays {
  std::string what;
  std::function<void(const std::filesystem::path&)> damage;  // applied to good arrays
  std::string fragment;
};

TEST(CliNpy, EveryWayTheArraysCanBeWrongIsOneLineNamingTheFile) {
  REQUIRE_BINARY();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<BadArrays> cases = {
      {"no test labels", [](auto d) { std::filesystem::remove(d / "test_y.npy"); },
       "test_y.npy: no such file"},
      {"another width", [](auto d) { write_arrays(d, "test", 4, 20); },
       "takes 784 inputs per sample, but npy/test has 20"},
      {"a NaN feature",
       [&](auto d) {
         std::vector<float> x(8 * 784, 0.5f);
         x[3 * 784 + 5] = nan;
         write_npy_array(d / "train_x.npy", "<f4", {8, 784}, x);
       },
       "train_x.npy: sample 3 holds nan at feature 5 (features must be finite)"},
      {"an infinite feature",
       [&](auto d) {
         std::vector<double> x(8 * 784, 0.5);
         x[7 * 784] = -std::numeric_limits<double>::infinity();
         write_npy_array(d / "train_x.npy", "<f8", {8, 784}, x);
       },
       "train_x.npy: sample 7 holds -inf at feature 0"},
      {"regression targets other than the outputs",
       [](auto d) {
         write_npy_array(d / "train_y.npy", "<f4", {8, 3}, std::vector<float>(24, 1.0f));
       },
       "npy/train has 3 regression targets per sample, but model 'mlp' has 10 outputs"},
      {"one regression target for ten outputs",
       [](auto d) { write_npy_array(d / "train_y.npy", "<f4", {8}, std::vector<float>(8, 1.0f)); },
       "npy/train has 1 regression target per sample, but model 'mlp' has 10 outputs"},
      {"an infinite target",
       [](auto d) {
         std::vector<float> y(80, 0.5f);
         y[2 * 10 + 9] = std::numeric_limits<float>::infinity();
         write_npy_array(d / "train_y.npy", "<f4", {8, 10}, y);
       },
       "train_y.npy: sample 2 holds inf at target 9 (targets must be finite)"},
      {"targets for training, labels for the test",
       [](auto d) {
         write_npy_array(d / "train_y.npy", "<f8", {8, 10}, std::vector<double>(80, 0.5));
       },
       "npy/train has float regression targets but npy/test has integer class labels"},
      {"training features of another width",
       [](auto d) { write_arrays(d, "train", 8, 783); },
       "takes 784 inputs per sample, but npy/train has 783"},
      {"a label past the outputs",
       [](auto d) {
         write_npy_array(d / "test_y.npy", "<i4", {4}, std::vector<std::int32_t>{0, 10, 2, 3});
       },
       "npy/test has label 10, but model 'mlp' has 10 outputs"},
      {"a negative label",
       [](auto d) {
         write_npy_array(d / "train_y.npy", "<i2", {8},
                         std::vector<std::int16_t>{0, 1, -1, 3, 4, 5, 6, 7});
       },
       "train_y.npy: sample 2 has label -1"},
      {"fewer labels than samples",
       [](auto d) { write_npy_array(d / "train_y.npy", "<i8", {7}, std::vector<std::int64_t>(7)); },
       "train_y.npy: 7 labels for the 8 samples of"},
      {"two columns of labels",
       [](auto d) {
         write_npy_array(d / "train_y.npy", "<i8", {8, 2}, std::vector<std::int64_t>(16));
       },
       "train_y.npy: shape (8, 2) is not one label per sample"},
      {"no samples",
       [](auto d) {
         write_npy_array(d / "train_x.npy", "<f4", {0, 784}, std::vector<float>());
         write_npy_array(d / "train_y.npy", "<i8", {0}, std::vector<std::int64_t>());
       },
       "train_x.npy: shape (0, 784) holds no samples"},
      {"a scalar",
       [](auto d) { write_npy_array(d / "train_x.npy", "<f4", {}, std::vector<float>{1}); },
       "train_x.npy: shape () holds no samples"},
      {"Fortran order",
       [](auto d) {
         testing::write_npy(d / "train_x.npy",
                            "{'descr': '<f4', 'fortran_order': True, 'shape': (8, 784), }",
                            std::string(8 * 784 * 4, '\0'));
       },
       "train_x.npy"},
      {"a truncated file",
       [](auto d) { std::filesystem::resize_file(d / "test_x.npy", 1000); }, "test_x.npy"},
  };
  for (const BadArrays& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir;
    write_arrays(dir / "npy", "train", 8, 784);
    write_arrays(dir / "npy", "test", 4, 784);
    c.damage(dir / "npy");
    const Output o = noeira(dir, "train --data npy --data-dir " + (dir / "npy").string() +
                                     " --model mlp --epochs 1 --batch 4 --threads 1 --out " +
                                     (dir / "run").string());
    expect_one_error_line(o, c.fragment);
  }
  TempDir dir;
  expect_one_error_line(noeira(dir, "train --data npy --model mlp --out " + (dir / "r").string()),
                        "--data npy needs --data-dir");
}

}  // namespace
}  // namespace noeira
