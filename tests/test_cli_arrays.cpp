// `noeira train --data arrays`: a user's arrays named one by one (--train-x, --train-y, --test-x,
// --test-y), each a .npy file, an HDF5 dataset anywhere in its file (file.h5:/group/x) or shards
// of either joined by commas. The property: the same values named this way, split into shards of
// both kinds, train bit for bit as the directory of .npy files does, and evaluate alike; and every
// name noeira cannot use is one line naming it.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "core/hash.hpp"
#include "h5_edit.hpp"
#include "io_test_files.hpp"
#include "saved_params.hpp"
#include "train/array_dataset.hpp"

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

std::vector<float> features(std::int64_t first, std::int64_t count) {
  std::vector<float> x;
  for (std::int64_t i = first * kFeatures; i < (first + count) * kFeatures; ++i) {
    x.push_back(static_cast<float>((i * 5) % 13) / 4.0f - 1.5f);
  }
  return x;
}

std::vector<std::int64_t> labels(std::int64_t first, std::int64_t count) {
  std::vector<std::int64_t> y;
  for (std::int64_t i = first; i < first + count; ++i) y.push_back((i * 3) % 10);
  return y;
}

// d/npy holds train (12 samples) and test (6) as --data npy reads them; d/x-0.npy (rows 0-4) and
// d/x-1.h5:/parts/x (rows 5-11) shard the training features; d/sim.h5:/fields/y holds the
// training labels as int16.
void write_arrays(const TempDir& d) {
  std::filesystem::create_directories(d / "npy");
  write_npy_array(d / "npy/train_x.npy", "<f4", {12, kFeatures}, features(0, 12));
  write_npy_array(d / "npy/train_y.npy", "<i8", {12}, labels(0, 12));
  write_npy_array(d / "npy/test_x.npy", "<f4", {6, kFeatures}, features(100, 6));
  write_npy_array(d / "npy/test_y.npy", "<i8", {6}, labels(100, 6));
  write_npy_array(d / "x-0.npy", "<f4", {5, kFeatures}, features(0, 5));
  io::h5::Lock held = io::h5::lock();
  auto h5 = [&](const std::string& file, const std::string& dataset, hid_t type,
                const Shape& shape, const std::vector<float>& values) {
    h5edit::Handle f(H5Fcreate((d / file).c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                     H5Fclose);
    h5edit::make_dataset(f.get(), dataset, type, shape, H5P_DEFAULT, &values);
  };
  h5("x-1.h5", "parts/x", H5T_IEEE_F32LE, {7, kFeatures}, features(5, 7));
  const std::vector<std::int64_t> y = labels(0, 12);
  h5("sim.h5", "fields/y", H5T_STD_I16LE, {12}, std::vector<float>(y.begin(), y.end()));
}

std::string named(const TempDir& d, const std::string& train_x) {
  return " --train-x " + train_x + " --train-y " + (d / "sim.h5").string() + ":/fields/y" +
         " --test-x " + (d / "npy/test_x.npy").string() + " --test-y " +
         (d / "npy/test_y.npy").string();
}

const std::string kRun = "train --model mlp --epochs 2 --batch 4 --threads 1";

TEST(CliArrays, NamedArraysAndShardsTrainBitForBitAsTheDirectory) {
  REQUIRE_BINARY();
  const TempDir d;
  write_arrays(d);
  const Output from_dir =
      noeira(d, kRun + " --data npy --data-dir " + (d / "npy").string() + " --out " +
                    (d / "dir").string());
  ASSERT_EQ(from_dir.code, 0) << from_dir.err;
  // No --data: naming the arrays says which data set it is.
  const std::string shards = (d / "x-0.npy").string() + "," + (d / "x-1.h5").string() + ":/parts/x";
  const Output from_names = noeira(d, kRun + named(d, shards) + " --out " + (d / "named").string());
  ASSERT_EQ(from_names.code, 0) << from_names.err;
  EXPECT_NE(from_names.out.find("arrays 12 train / 6 test samples"), std::string::npos)
      << from_names.out;
  EXPECT_EQ(saved_mlp(d / "named/model.h5"), saved_mlp(d / "dir/model.h5"));

  const Output eval = noeira(d, "eval --params " + (d / "named/model.h5").string() +
                                    " --data arrays --test-x " +
                                    (d / "npy/test_x.npy").string() + " --test-y " +
                                    (d / "npy/test_y.npy").string());
  const Output eval_dir = noeira(d, "eval --params " + (d / "dir/model.h5").string() +
                                        " --data npy --data-dir " + (d / "npy").string());
  ASSERT_EQ(eval.code, 0) << eval.err;
  ASSERT_EQ(eval_dir.code, 0) << eval_dir.err;
  EXPECT_EQ(eval.out.substr(eval.out.find("test loss")),
            eval_dir.out.substr(eval_dir.out.find("test loss")));
}

TEST(CliArrays, EveryNameItCannotUseIsOneLineNamingIt) {
  REQUIRE_BINARY();
  const TempDir d;
  write_arrays(d);
  write_npy_array(d / "narrow.npy", "<f4", {3, 5}, std::vector<float>(15, 1.0f));
  write_npy_array(d / "floats_y.npy", "<f4", {2}, std::vector<float>{1.0f, 2.0f});
  std::filesystem::create_directories(d / "npy.h5");
  const std::string x0 = (d / "x-0.npy").string(), sim = (d / "sim.h5").string();
  const std::string out = " --out " + (d / "run").string();
  struct Case {
    std::string args, fragment;
  };
  const std::vector<Case> cases = {
      {named(d, sim), "sim.h5: an HDF5 file holds many arrays; name the dataset, as "},
      {named(d, sim + ":/"), "sim.h5:/: names no dataset in the file"},
      {named(d, sim + ":/fields/nope"), "dataset 'fields/nope'"},
      {named(d, (d / "x.csv").string()), "x.csv: not an array file noeira reads"},
      {named(d, (d / "none.npy").string()), "none.npy"},
      {named(d, (d / "none.h5").string() + ":/x"), "none.h5: file not found"},
      {named(d, (d / "npy").string() + ".h5:/x"), "npy.h5: is a directory, expected an HDF5 file"},
      {named(d, (d / "x-0.npy").string() + "," + (d / "npy/train_x.npy").string() + ".h5:/x"),
       "train_x.npy.h5: file not found"},
      {named(d, x0 + "," + (d / "narrow.npy").string()),
       "narrow.npy: rows of shape [rows, 5] beside shard"},
      {named(d, x0 + ",," + x0), "shard 2 of the list is empty"},
      {" --data arrays --train-x " + x0, "--data arrays needs --train-y"},
      {" --data npy --data-dir " + (d / "npy").string() + " --train-x " + x0,
       "--train-x applies to --data arrays"},
      {named(d, x0) + " --data-dir " + (d / "npy").string(), "--data-dir does not apply"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    expect_one_error_line(noeira(d, kRun + c.args + out), c.fragment);
  }
  // Shards of labels, one of them floats (regression targets).
  const std::string y_shards = (d / "npy/train_y.npy").string() + "," + (d / "floats_y.npy").string();
  expect_one_error_line(
      noeira(d, kRun + " --train-x " + x0 + " --train-y " + y_shards + " --test-x " + x0 +
                    " --test-y " + y_shards + out),
      "floats_y.npy: holds floats beside shard");
}

// --stream-data reads each batch's rows from the files instead of holding the features: the same
// numbers, so the same bits, on two simulated ranks under ZeRO-3 (each rank reading its own rows
// of every batch, shuffled) and in evaluation (file order), from .npy, HDF5 and shards of both.
TEST(CliStreamData, StreamedFeaturesTrainBitForBitAsHeldOnes) {
  REQUIRE_BINARY();
  const TempDir d;
  write_arrays(d);
  const std::string shards = (d / "x-0.npy").string() + "," + (d / "x-1.h5").string() + ":/parts/x";
  const std::string ranks = " --sim-ranks 2 --policy zero3";
  const Output held = noeira(d, kRun + ranks + " --data npy --data-dir " + (d / "npy").string() +
                                    " --out " + (d / "held").string());
  ASSERT_EQ(held.code, 0) << held.err;
  EXPECT_EQ(held.out.find("streamed"), std::string::npos) << held.out;
  const Output from_dir =
      noeira(d, kRun + ranks + " --stream-data --data npy --data-dir " + (d / "npy").string() +
                    " --out " + (d / "dir").string());
  ASSERT_EQ(from_dir.code, 0) << from_dir.err;
  EXPECT_NE(from_dir.out.find("(features streamed from the files)"), std::string::npos)
      << from_dir.out;
  const Output from_shards =
      noeira(d, kRun + ranks + " --stream-data" + named(d, shards) + " --out " +
                    (d / "shards").string());
  ASSERT_EQ(from_shards.code, 0) << from_shards.err;
  EXPECT_EQ(saved_mlp(d / "dir/model.h5"), saved_mlp(d / "held/model.h5"));
  EXPECT_EQ(saved_mlp(d / "shards/model.h5"), saved_mlp(d / "held/model.h5"));
  const auto epochs = testing::metrics_records(d / "shards/metrics.jsonl", "epoch");
  const auto expected = testing::metrics_records(d / "held/metrics.jsonl", "epoch");
  ASSERT_EQ(epochs.size(), expected.size());
  for (std::size_t e = 0; e < epochs.size(); ++e) {
    EXPECT_EQ(epochs[e]["test_loss"], expected[e]["test_loss"]);
  }
  const std::string eval = "eval --params " + (d / "held/model.h5").string() +
                           " --data npy --data-dir " + (d / "npy").string();
  const Output a = noeira(d, eval), b = noeira(d, eval + " --stream-data");
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
}

// The data's hash, which checkpoints keep, is the same whether the features are held or
// streamed: a run checkpointed holding them resumes streaming them (and the other way), to the
// same bits. The hash itself over pieces of an odd width and more than one 1 MiB piece.
TEST(CliStreamData, AHeldRunResumesStreamedToTheSameBits) {
  REQUIRE_BINARY();
  const TempDir d;
  std::filesystem::create_directories(d / "odd");
  std::vector<float> odd(100001 * 3);
  for (std::size_t i = 0; i < odd.size(); ++i) odd[i] = static_cast<float>(i % 101) * 0.5f;
  write_npy_array(d / "odd/train_x.npy", "<f4", {100001, 3}, odd);
  write_npy_array(d / "odd/train_y.npy", "<i8", {100001}, std::vector<std::int64_t>(100001, 1));
  const Dataset held = load_npy_split(d / "odd", "train", 0, false);
  const Dataset streamed = load_npy_split(d / "odd", "train", 0, true);
  ASSERT_TRUE(streamed.streamed != nullptr);
  ASSERT_FALSE(held.values.numel() == 0);
  EXPECT_EQ(streamed.streamed_hash,
            hash_words(std::span<const float>(held.values.data(),
                                              static_cast<std::size_t>(held.values.numel()))));

  write_arrays(d);
  const std::string data = " --data npy --data-dir " + (d / "npy").string();
  const Output whole = noeira(d, kRun + data + " --checkpoint-dir " + (d / "ck").string() +
                                     " --checkpoint-every 3 --keep-last 0 --out " +
                                     (d / "whole").string());
  ASSERT_EQ(whole.code, 0) << whole.err;
  const Output resumed =
      noeira(d, kRun + data + " --stream-data --resume " + (d / "ck/step-00000003").string() +
                    " --out " + (d / "resumed").string());
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(saved_mlp(d / "resumed/model.h5"), saved_mlp(d / "whole/model.h5"));
}

TEST(CliStreamData, IsRefusedForImagesAndStillChecksEveryValue) {
  REQUIRE_BINARY();
  const TempDir d;
  write_arrays(d);
  expect_one_error_line(noeira(d, kRun + " --stream-data --out " + (d / "run").string()),
                        "--stream-data applies to a user's arrays (--data npy, h5 or arrays), "
                        "not --data fashion-mnist");
  std::vector<float> x = features(0, 5);
  x[3 * kFeatures + 7] = std::numeric_limits<float>::infinity();
  write_npy_array(d / "x-0.npy", "<f4", {5, kFeatures}, x);
  const std::string shards = (d / "x-0.npy").string() + "," + (d / "x-1.h5").string() + ":/parts/x";
  expect_one_error_line(
      noeira(d, kRun + " --stream-data" + named(d, shards) + " --out " + (d / "run").string()),
      "x-0.npy," );
  expect_one_error_line(
      noeira(d, kRun + " --stream-data" + named(d, shards) + " --out " + (d / "run").string()),
      ": sample 3 holds inf at feature 7 (features must be finite)");
}

}  // namespace
}  // namespace noeira
