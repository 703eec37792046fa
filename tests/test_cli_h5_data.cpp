// `noeira train --data h5` end to end: a user's arrays as HDF5 datasets /x and /y of train.h5 and
// test.h5. The property: the same values stored as HDF5 in other types and byte orders (x
// float64 big-endian, chunked and deflated; labels int16 big-endian; targets float32) train bit
// for bit as the .npy arrays do, for a classification and a regression. And every dataset noeira
// must not read, or cannot use, is one line naming the file and the dataset.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "h5_edit.hpp"
#include "io_test_files.hpp"
#include "saved_params.hpp"

namespace noeira {
namespace {

using testing::Output;
using testing::TempDir;
using testing::expect_one_error_line;
using testing::noeira;
using testing::saved_mlp;
using testing::write_npy_array;
namespace h5edit = testing::h5edit;

constexpr std::int64_t kFeatures = 784;

// `count` samples of features k/4 - 2 (exact in every float type) and, per sample, either a
// label i % 10 or ten targets (i + c) / 8.
struct Arrays {
  std::int64_t count = 0;
  std::vector<float> x, y;
  bool regression = false;
};

Arrays arrays(std::int64_t count, bool regression, std::int64_t salt) {
  Arrays a{count, {}, {}, regression};
  for (std::int64_t i = 0; i < count * kFeatures; ++i) {
    a.x.push_back(static_cast<float>((i * 7 + salt) % 17) / 4.0f - 2.0f);
  }
  for (std::int64_t i = 0; i < count; ++i) {
    if (!regression) a.y.push_back(static_cast<float>((i + salt) % 10));
    for (int c = 0; regression && c < 10; ++c) a.y.push_back(static_cast<float>(i + c) / 8.0f);
  }
  return a;
}

void write_npy(const std::filesystem::path& dir, const std::string& split, const Arrays& a) {
  std::filesystem::create_directories(dir);
  write_npy_array(dir / (split + "_x.npy"), "<f4", {a.count, kFeatures}, a.x);
  if (a.regression) {
    write_npy_array(dir / (split + "_y.npy"), "<f4", {a.count, 10}, a.y);
  } else {
    write_npy_array(dir / (split + "_y.npy"), "<i8", {a.count},
                    std::vector<std::int64_t>(a.y.begin(), a.y.end()));
  }
}

// <split>.h5 with /x float64 big-endian in deflated chunks of 3 samples, and /y int16 big-endian
// labels or float32 targets. `edit` then changes the open file.
void write_h5(const std::filesystem::path& dir, const std::string& split, const Arrays& a,
              const std::function<void(hid_t)>& edit = {}) {
  std::filesystem::create_directories(dir);
  io::h5::Lock held = io::h5::lock();
  const std::filesystem::path file = dir / (split + ".h5");
  h5edit::Handle f(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  h5edit::Handle chunked = h5edit::plist(H5P_DATASET_CREATE);
  const hsize_t chunk[2] = {3, static_cast<hsize_t>(kFeatures)};
  h5edit::check(H5Pset_chunk(chunked.get(), 2, chunk), "H5Pset_chunk");
  h5edit::check(H5Pset_deflate(chunked.get(), 4), "H5Pset_deflate");
  h5edit::make_dataset(f.get(), "x", H5T_IEEE_F64BE, {a.count, kFeatures}, chunked.get(), &a.x);
  if (a.regression) {
    h5edit::make_dataset(f.get(), "y", H5T_IEEE_F32LE, {a.count, 10}, H5P_DEFAULT, &a.y);
  } else {
    h5edit::make_dataset(f.get(), "y", H5T_STD_I16BE, {a.count}, H5P_DEFAULT, &a.y);
  }
  if (edit) edit(f.get());
}

std::string train_args(const std::filesystem::path& dir, const std::string& data,
                       const std::filesystem::path& out) {
  return "train --data " + data + " --data-dir " + dir.string() +
         " --model mlp --epochs 2 --batch 4 --threads 1 --out " + out.string();
}

TEST(CliH5Data, TheSameValuesTrainBitForBitFromHdf5AsFromNpy) {
  REQUIRE_BINARY();
  for (const bool regression : {false, true}) {
    SCOPED_TRACE(regression ? "regression" : "classification");
    TempDir dir;
    const Arrays train = arrays(12, regression, 1), test = arrays(6, regression, 2);
    write_npy(dir / "npy", "train", train);
    write_npy(dir / "npy", "test", test);
    write_h5(dir / "h5", "train", train);
    write_h5(dir / "h5", "test", test);
    const Output from_npy = noeira(dir, train_args(dir / "npy", "npy", dir / "npy-run"));
    ASSERT_EQ(from_npy.code, 0) << from_npy.err;
    const Output from_h5 = noeira(dir, train_args(dir / "h5", "h5", dir / "h5-run"));
    ASSERT_EQ(from_h5.code, 0) << from_h5.err;
    EXPECT_NE(from_h5.out.find("h5 12 train / 6 test samples"), std::string::npos)
        << from_h5.out;
    EXPECT_EQ(saved_mlp(dir / "h5-run" / "model.h5"), saved_mlp(dir / "npy-run" / "model.h5"));
    const auto epochs = testing::metrics_records(dir / "h5-run" / "metrics.jsonl", "epoch");
    const auto expected = testing::metrics_records(dir / "npy-run" / "metrics.jsonl", "epoch");
    ASSERT_EQ(epochs.size(), 2u);
    for (std::size_t e = 0; e < epochs.size(); ++e) {
      EXPECT_EQ(epochs[e]["train_loss"], expected[e]["train_loss"]);
      EXPECT_EQ(epochs[e]["test_loss"], expected[e]["test_loss"]);
      EXPECT_EQ(epochs[e].contains("test_r2"), regression) << epochs[e].dump();
    }
  }
}

struct BadFile {
  std::string what;
  std::function<void(const std::filesystem::path& dir, hid_t train)> edit;
  std::string fragment;
};

TEST(CliH5Data, EveryDatasetItCannotUseIsOneLineNamingTheFileAndTheDataset) {
  REQUIRE_BINARY();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<BadFile> cases = {
      {"no /y", [](auto, hid_t f) { h5edit::remove_link(f, "y"); }, "train.h5: dataset 'y'"},
      {"a string /y",
       [](auto, hid_t f) {
         h5edit::remove_link(f, "y");
         io::h5::write_string_dataset(f, "y", "labels", "train.h5");
       },
       "holds a fixed-length string, expected integers or floats"},
      {"a soft link /x",
       [](auto, hid_t f) {
         h5edit::remove_link(f, "x");
         h5edit::check(H5Lcreate_soft("/y", f, "x", H5P_DEFAULT, H5P_DEFAULT), "soft");
       },
       "is a soft link to '/y'"},
      {"/x stored in another file",
       [](auto dir, hid_t f) {
         const std::vector<float> values(4 * kFeatures, 0.5f);
         h5edit::write_floats(dir / "raw.bin", values);
         h5edit::Handle dcpl = h5edit::external_dcpl(dir / "raw.bin", values.size());
         h5edit::make_dataset(f, "x", H5T_IEEE_F32LE, {4, kFeatures}, dcpl.get(), nullptr);
       },
       "external file"},
      {"a NaN in /x",
       [&](auto, hid_t f) {
         std::vector<float> x = arrays(4, false, 1).x;
         x[3 * kFeatures + 5] = nan;
         h5edit::make_dataset(f, "x", H5T_IEEE_F32LE, {4, kFeatures}, H5P_DEFAULT, &x);
       },
       "train.h5:/x: sample 3 holds nan at feature 5"},
      {"more labels than samples",
       [](auto, hid_t f) {
         const std::vector<float> y(5, 1.0f);
         h5edit::make_dataset(f, "y", H5T_STD_I32LE, {5}, H5P_DEFAULT, &y);
       },
       "train.h5:/y: 5 labels for the 4 samples of"},
      {"a label past the outputs",
       [](auto, hid_t f) {
         const std::vector<float> y = {0, 1, 12, 3};
         h5edit::make_dataset(f, "y", H5T_STD_U8LE, {4}, H5P_DEFAULT, &y);
       },
       "h5/train has label 12, but model 'mlp' has 10 outputs"},
  };
  for (const BadFile& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir;
    write_h5(dir / "h5", "test", arrays(4, false, 2));
    write_h5(dir / "h5", "train", arrays(4, false, 1),
             [&](hid_t f) { c.edit(dir / "h5", f); });
    expect_one_error_line(noeira(dir, train_args(dir / "h5", "h5", dir / "run")), c.fragment);
  }
  TempDir dir;
  write_h5(dir / "h5", "train", arrays(4, false, 1));
  expect_one_error_line(noeira(dir, train_args(dir / "h5", "h5", dir / "run")),
                        "test.h5: no such file (--data h5 reads test.h5 (datasets /x, /y)");
  h5edit::write_floats(dir / "h5" / "test.h5", std::vector<float>(64, 1.0f));
  expect_one_error_line(noeira(dir, train_args(dir / "h5", "h5", dir / "run")), "test.h5");
  expect_one_error_line(noeira(dir, "train --data h5 --model mlp --out " + (dir / "r").string()),
                        "--data h5 needs --data-dir, the directory of train.h5 and test.h5");
}

}  // namespace
}  // namespace noeira
