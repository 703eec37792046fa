// Arrays a program holds in its own memory (io/memory_array.hpp), named "memory:NAME" wherever an
// array is named. The properties: a run on the program's arrays trains the numbers, bit for bit,
// of a run on the same arrays in .npy files, its features read from the memory batch by batch
// (never copied whole); bfloat16 features train as the float32 values they stand for; memory and
// files mix as shards; and every array noeira cannot use is one line naming it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "catalogue_test_util.hpp"
#include "io/array_spec.hpp"
#include "io/memory_array.hpp"
#include "saved_params.hpp"
#include "train/model_entry.hpp"
#include "train/run.hpp"

namespace noeira {
namespace {

using testing::InstalledCatalogue;
using testing::TempDir;
using testing::UserNet;
using testing::expect_error_containing;
using testing::regression_arrays;
using testing::RegressionArrays;

// Withdraws the arrays a test provided, however it ends.
struct Provided {
  ~Provided() {
    for (const char* name : {"train_x", "train_y", "test_x", "test_y"}) io::withdraw_array(name);
  }
};

TrainConfig arrays_run(const TempDir& dir, const std::string& train_x, const std::string& train_y,
                       const std::string& test_x, const std::string& test_y,
                       const std::string& out) {
  TrainConfig cfg = testing::zero3_run(dir, "user-net", 2, 8);
  cfg.data = DatasetKind::Arrays;
  cfg.data_dir.clear();
  cfg.train_x = train_x;
  cfg.train_y = train_y;
  cfg.test_x = test_x;
  cfg.test_y = test_y;
  cfg.out = (dir / out).string();
  return cfg;
}

std::vector<float> saved(const TempDir& dir, const std::string& out) {
  return testing::saved_values<UserNet>(dir / out / "model.h5", "user-net");
}

TEST(MemoryArrays, TrainAsTheSameArraysInFilesReadFromMemoryBatchByBatch) {
  const TempDir dir;
  const InstalledCatalogue installed(ModelCatalogue({model_entry<UserNet>("user-net", "mine")}));
  testing::write_regression(dir.path(), "train", 48);
  testing::write_regression(dir.path(), "test", 16);
  const RegressionArrays train = regression_arrays(48), test = regression_arrays(16);
  const Provided provided;
  io::provide_array("train_x", io::memory_array(std::span<const float>(train.x), {48, 6}));
  io::provide_array("train_y", io::memory_array(std::span<const float>(train.y), {48, 2}));
  io::provide_array("test_x", io::memory_array(std::span<const float>(test.x), {16, 6}));
  io::provide_array("test_y", io::memory_array(std::span<const float>(test.y), {16, 2}));

  const std::string d = dir.path().string() + "/";
  (void)run_train(arrays_run(dir, d + "train_x.npy", d + "train_y.npy", d + "test_x.npy",
                             d + "test_y.npy", "files"));
  ::testing::internal::CaptureStdout();
  (void)run_train(arrays_run(dir, "memory:train_x", "memory:train_y", "memory:test_x",
                             "memory:test_y", "memory"));
  const std::string header = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(header.find("(features read from the program's memory)"), std::string::npos) << header;
  EXPECT_EQ(saved(dir, "memory"), saved(dir, "files"));

  // Shards of memory and of files are one array.
  const RegressionArrays half = regression_arrays(24);
  io::provide_array("train_x", io::memory_array(std::span<const float>(half.x), {24, 6}));
  io::provide_array("train_y", io::memory_array(std::span<const float>(half.y), {24, 2}));
  const RegressionArrays rest = regression_arrays(48);
  testing::write_npy_array(dir / "rest_x.npy", "<f4", {24, 6},
                           std::vector<float>(rest.x.begin() + 24 * 6, rest.x.end()));
  testing::write_npy_array(dir / "rest_y.npy", "<f4", {24, 2},
                           std::vector<float>(rest.y.begin() + 24 * 2, rest.y.end()));
  (void)run_train(arrays_run(dir, "memory:train_x," + d + "rest_x.npy",
                             "memory:train_y," + d + "rest_y.npy", "memory:test_x",
                             "memory:test_y", "mixed"));
  EXPECT_EQ(saved(dir, "mixed"), saved(dir, "files"));
}

// The upper 16 bits of a float: its bfloat16, rounded toward zero (exact for the values below).
std::uint16_t bf16_bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return static_cast<std::uint16_t>(bits >> 16);
}

float bf16_value(float f) {
  const std::uint32_t bits = static_cast<std::uint32_t>(bf16_bits(f)) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

TEST(MemoryArrays, Bfloat16FeaturesTrainAsTheFloatsTheyStandFor) {
  const TempDir dir;
  const InstalledCatalogue installed(ModelCatalogue({model_entry<UserNet>("user-net", "mine")}));
  const RegressionArrays train = regression_arrays(48), test = regression_arrays(16);
  std::vector<std::uint16_t> train_bits, test_bits;
  std::vector<float> train_values, test_values;
  for (const float v : train.x) {
    train_bits.push_back(bf16_bits(v));
    train_values.push_back(bf16_value(v));
  }
  for (const float v : test.x) {
    test_bits.push_back(bf16_bits(v));
    test_values.push_back(bf16_value(v));
  }
  const Provided provided;
  io::provide_array("train_y", io::memory_array(std::span<const float>(train.y), {48, 2}));
  io::provide_array("test_y", io::memory_array(std::span<const float>(test.y), {16, 2}));
  io::provide_array("train_x", io::memory_array_bf16(train_bits, {48, 6}));
  io::provide_array("test_x", io::memory_array_bf16(test_bits, {16, 6}));
  (void)run_train(arrays_run(dir, "memory:train_x", "memory:train_y", "memory:test_x",
                             "memory:test_y", "bf16"));
  io::provide_array("train_x", io::memory_array(std::span<const float>(train_values), {48, 6}));
  io::provide_array("test_x", io::memory_array(std::span<const float>(test_values), {16, 6}));
  (void)run_train(arrays_run(dir, "memory:train_x", "memory:train_y", "memory:test_x",
                             "memory:test_y", "f32"));
  EXPECT_EQ(saved(dir, "bf16"), saved(dir, "f32"));
}

TEST(MemoryArrays, WhatCannotBeReadIsOneLineNamingTheArray) {
  const Provided provided;
  const std::vector<float> six(6, 1.0f);
  expect_error_containing([] { (void)io::open_array_spec("memory:train_x"); },
                          "memory:train_x: no array of that name was provided in this process");
  expect_error_containing([&] { (void)io::memory_array(std::span<const float>(six), {4, 2}); },
                          "memory_array: 6 values for a shape of 8");
  expect_error_containing([&] { (void)io::memory_array(std::span<const float>(six), {}); },
                          "a shape of no dimensions");
  expect_error_containing(
      [&] { io::provide_array("a,b", io::memory_array(std::span<const float>(six), {6})); },
      "'a,b' is no array name");
  expect_error_containing(
      [] { io::provide_array("train_x", io::MemoryArray{nullptr, io::MemoryElement::F32, {3}}); },
      "memory:train_x: no memory (a null pointer) for 3 elements");
  expect_error_containing(
      [] {
        io::provide_array("train_x", io::MemoryArray{nullptr, io::MemoryElement::F32, {2, -1}});
      },
      "dimension -1 of the shape");
  // Float labels where ids are read, as from a file.
  io::provide_array("train_y", io::memory_array(std::span<const float>(six), {6}));
  const auto labels = io::open_array_spec("memory:train_y");
  std::vector<std::int64_t> ids(6);
  expect_error_containing([&] { labels->read_rows(0, 6, std::span(ids)); },
                          "memory:train_y: holds float32, expected integers");
  // A withdrawn array is gone.
  io::withdraw_array("train_y");
  expect_error_containing([] { (void)io::open_array_spec("memory:train_y"); },
                          "no array of that name");
}

}  // namespace
}  // namespace noeira
