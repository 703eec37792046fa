// `noeira train --normalize standardize` and `--feature-scale/--feature-shift` on a user's arrays
// (train/feature_normalization.hpp). The properties: the recorded statistics are the training
// split's, computed here independently; a run on the raw features equals, bit for bit, a run on
// features this test normalized with the recorded lists (held or streamed); eval of model.h5 and
// of a checkpoint applies the same lists; uint8 features scaled by 1/255 train as the floats x/255;
// and every option or recorded list noeira cannot use is one line naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "h5_edit.hpp"
#include "io/params_file.hpp"
#include "io/safetensors.hpp"
#include "io_test_files.hpp"
#include "saved_params.hpp"
#include "train/feature_normalization.hpp"

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
constexpr std::int64_t kTrain = 24, kTest = 8;
constexpr std::int64_t kConstant = 5;  // a feature that never varies

// Features far from 0 and of unequal spread (what standardizing is for); feature kConstant is 7.
std::vector<float> raw_features(std::int64_t first, std::int64_t count) {
  std::vector<float> x;
  for (std::int64_t i = first; i < first + count; ++i) {
    for (std::int64_t f = 0; f < kFeatures; ++f) {
      const float wobble = static_cast<float>((i * 7 + f * 3) % 11) - 5.0f;
      x.push_back(f == kConstant ? 7.0f : 1000.0f + static_cast<float>(f) + wobble * (1 + f % 5));
    }
  }
  return x;
}

std::vector<std::int64_t> labels(std::int64_t first, std::int64_t count) {
  std::vector<std::int64_t> y;
  for (std::int64_t i = first; i < first + count; ++i) y.push_back((i * 3) % 10);
  return y;
}

void write_split(const std::filesystem::path& dir, const std::string& split,
                 const std::vector<float>& x, std::int64_t first, std::int64_t count) {
  std::filesystem::create_directories(dir);
  write_npy_array(dir / (split + "_x.npy"), "<f4", {count, kFeatures}, x);
  write_npy_array(dir / (split + "_y.npy"), "<i8", {count}, labels(first, count));
}

void write_raw(const std::filesystem::path& dir) {
  write_split(dir, "train", raw_features(0, kTrain), 0, kTrain);
  write_split(dir, "test", raw_features(100, kTest), 100, kTest);
}

std::string attribute(const std::filesystem::path& model, const char* name) {
  return io::read_params_attribute(model, name).value_or("");
}

std::string test_loss(const Output& eval) { return eval.out.substr(eval.out.find("test loss")); }

const std::string kRun = "train --model mlp --epochs 2 --batch 6 --threads 1 --data npy";

TEST(CliNormalize, StandardizeRecordsTheTrainingStatisticsAndTrainsAsPreNormalizedData) {
  REQUIRE_BINARY();
  const TempDir d;
  write_raw(d / "raw");
  const std::string raw = " --data-dir " + (d / "raw").string();
  const Output held = noeira(d, kRun + raw + " --normalize standardize --out " +
                                    (d / "held").string() + " --checkpoint-dir " +
                                    (d / "ck").string());
  ASSERT_EQ(held.code, 0) << held.err;
  EXPECT_NE(held.out.find("features standardized by the training split's statistics"),
            std::string::npos)
      << held.out;

  // The training split's statistics, computed here in double: the population standard
  // deviation, 1 for the feature that never varies.
  const auto mean = parse_float_list(attribute(d / "held/model.h5", "input_mean"));
  const auto std = parse_float_list(attribute(d / "held/model.h5", "input_std"));
  ASSERT_TRUE(mean && std);
  ASSERT_EQ(mean->size(), static_cast<std::size_t>(kFeatures));
  ASSERT_EQ(std->size(), static_cast<std::size_t>(kFeatures));
  const std::vector<float> x = raw_features(0, kTrain);
  for (std::int64_t f = 0; f < kFeatures; ++f) {
    double sum = 0.0, squares = 0.0;
    for (std::int64_t i = 0; i < kTrain; ++i) sum += x[static_cast<std::size_t>(i * kFeatures + f)];
    const double m = sum / kTrain;
    for (std::int64_t i = 0; i < kTrain; ++i) {
      const double dev = x[static_cast<std::size_t>(i * kFeatures + f)] - m;
      squares += dev * dev;
    }
    const double s = f == kConstant ? 1.0 : std::sqrt(squares / kTrain);
    const auto at = static_cast<std::size_t>(f);
    EXPECT_EQ((*mean)[at], static_cast<float>(m)) << "feature " << f;
    EXPECT_NEAR((*std)[at], s, 1e-6 * s) << "feature " << f;
  }

  // The same run on features normalized here with the recorded lists: the same bits.
  FeatureNormalization n{*mean, *std};
  std::vector<float> train = x, test = raw_features(100, kTest);
  n.apply(train, kFeatures);
  n.apply(test, kFeatures);
  write_split(d / "pre", "train", train, 0, kTrain);
  write_split(d / "pre", "test", test, 100, kTest);
  const Output pre =
      noeira(d, kRun + " --data-dir " + (d / "pre").string() + " --out " + (d / "pre-run").string());
  ASSERT_EQ(pre.code, 0) << pre.err;
  EXPECT_EQ(saved_mlp(d / "held/model.h5"), saved_mlp(d / "pre-run/model.h5"));
  EXPECT_EQ(attribute(d / "pre-run/model.h5", "input_mean"), "");

  // Streamed features are normalized as they are read: the same bits again.
  const Output streamed = noeira(d, kRun + raw + " --normalize standardize --stream-data --out " +
                                        (d / "streamed").string());
  ASSERT_EQ(streamed.code, 0) << streamed.err;
  EXPECT_EQ(saved_mlp(d / "held/model.h5"), saved_mlp(d / "streamed/model.h5"));

  // eval of model.h5 and of the checkpoint on the raw features is eval of the plain model on the
  // normalized ones.
  const Output eval_pre = noeira(d, "eval --params " + (d / "pre-run/model.h5").string() +
                                        " --data npy --data-dir " + (d / "pre").string());
  const Output eval_held =
      noeira(d, "eval --params " + (d / "held/model.h5").string() + " --data npy" + raw);
  const Output eval_ck =
      noeira(d, "eval --checkpoint " + (d / "ck/latest").string() + " --data npy" + raw);
  for (const Output* o : {&eval_pre, &eval_held, &eval_ck}) ASSERT_EQ(o->code, 0) << o->err;
  EXPECT_EQ(test_loss(eval_held), test_loss(eval_pre));
  EXPECT_EQ(test_loss(eval_ck), test_loss(eval_pre));

  // export carries the lists into the safetensors metadata.
  const Output exported = noeira(d, "export --params " + (d / "held/model.h5").string() + " -o " +
                                        (d / "m.safetensors").string());
  ASSERT_EQ(exported.code, 0) << exported.err;
  const auto metadata = io::SafetensorsFile::open(d / "m.safetensors").metadata();
  EXPECT_EQ(metadata.at("input_mean"), attribute(d / "held/model.h5", "input_mean"));
  EXPECT_EQ(metadata.at("input_std"), attribute(d / "held/model.h5", "input_std"));
}

TEST(CliNormalize, Uint8FeaturesScaledBy1Over255TrainAsTheFloatsXOver255) {
  REQUIRE_BINARY();
  const TempDir d;
  std::vector<std::uint8_t> bytes;
  std::vector<float> floats;
  for (std::int64_t i = 0; i < (kTrain + kTest) * kFeatures; ++i) {
    bytes.push_back(static_cast<std::uint8_t>((i * 37) % 256));
    floats.push_back(static_cast<float>(bytes.back()) / 255.0f);
  }
  const auto part = [](const auto& v, std::int64_t first, std::int64_t count) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    return std::vector<T>(v.begin() + first * kFeatures, v.begin() + (first + count) * kFeatures);
  };
  for (const auto& [dir, descr] : {std::pair{"u8", "|u1"}, std::pair{"f32", "<f4"}}) {
    std::filesystem::create_directories(d / dir);
    const bool u8 = std::string(dir) == "u8";
    for (const auto& [split, first, count] :
         {std::tuple{"train", std::int64_t{0}, kTrain}, std::tuple{"test", kTrain, kTest}}) {
      const std::filesystem::path x = d / dir / (std::string(split) + "_x.npy");
      if (u8) {
        write_npy_array(x, descr, {count, kFeatures}, part(bytes, first, count));
      } else {
        write_npy_array(x, descr, {count, kFeatures}, part(floats, first, count));
      }
      write_npy_array(d / dir / (std::string(split) + "_y.npy"), "<i8", {count},
                      labels(first, count));
    }
  }
  const Output scaled = noeira(d, kRun + " --data-dir " + (d / "u8").string() +
                                      " --feature-scale 0.00392156862745098 --out " +
                                      (d / "scaled").string());
  const Output plain =
      noeira(d, kRun + " --data-dir " + (d / "f32").string() + " --out " + (d / "plain").string());
  ASSERT_EQ(scaled.code, 0) << scaled.err;
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(saved_mlp(d / "scaled/model.h5"), saved_mlp(d / "plain/model.h5"));
  EXPECT_EQ(attribute(d / "scaled/model.h5", "input_mean"), "[-0]");
  EXPECT_EQ(attribute(d / "scaled/model.h5", "input_std"), "[255]");
}

TEST(CliNormalize, EveryOptionOrRecordedListItCannotUseIsOneLine) {
  REQUIRE_BINARY();
  const TempDir d;
  write_raw(d / "raw");
  const std::string raw = " --data-dir " + (d / "raw").string();
  struct Case {
    std::string args, fragment;
  };
  std::vector<Case> refused = {
      {"train --model mlp --data mnist --normalize standardize",
       "--normalize applies to a user's arrays"},
      {"train --model mlp --data fashion-mnist --feature-scale 2",
       "--feature-scale/--feature-shift applies to a user's arrays"},
      {kRun + raw + " --normalize standardize --feature-shift 1", "standardizing undoes"},
      {kRun + raw + " --feature-scale 0", "--feature-scale must be a finite number other than 0"},
      {kRun + raw + " --feature-shift inf", "--feature-shift"},
      {kRun + raw + " --normalize minmax", "--normalize"},
  };
  for (const char* stream : {"", " --stream-data"}) {
    refused.push_back({kRun + raw + " --feature-scale 1e37" + stream,
                       "npy/train: sample 0, feature 0 becomes inf once normalized"});
  }
  for (const Case& c : refused) {
    SCOPED_TRACE(c.args);
    expect_one_error_line(noeira(d, c.args + " --out " + (d / "never").string()), c.fragment);
  }
  EXPECT_FALSE(std::filesystem::exists(d / "never"));

  const Output run = noeira(d, kRun + raw + " --normalize standardize --out " + (d / "r").string());
  ASSERT_EQ(run.code, 0) << run.err;
  const std::vector<std::pair<std::function<void(hid_t)>, std::string>> lies = {
      {[](hid_t f) {
         std::string zeros = "[0";
         for (int i = 1; i < 784; ++i) zeros += ",0";
         h5edit::put_string(f, "input_std", zeros + "]");
       },
       "'input_std' is 0 at feature 0"},
      {[](hid_t f) {
         h5edit::put_string(f, "input_mean", "[1,2]");
         h5edit::put_string(f, "input_std", "[1,2]");
       },
       "'input_mean' has 2 values for a model of 784 inputs"},
      {[](hid_t f) { h5edit::remove_attr(f, "input_std"); }, "'input_std' is missing"},
      {[](hid_t f) { h5edit::put_string(f, "input_std", "[2]"); }, "'input_std' has 1 values"},
      {[](hid_t f) { h5edit::put_string(f, "input_mean", "[1,nan]"); }, "'input_mean' is not a list"},
      {[](hid_t f) { h5edit::put_string(f, "input_mean", "[1,,2]"); }, "'input_mean' is not a list"},
  };
  for (std::size_t i = 0; i < lies.size(); ++i) {
    SCOPED_TRACE(lies[i].second);
    const std::filesystem::path model = d / ("lie-" + std::to_string(i) + ".h5");
    std::filesystem::copy_file(d / "r/model.h5", model);
    {
      io::h5::Lock held = io::h5::lock();
      h5edit::Handle f(H5Fopen(model.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
      lies[i].first(f.get());
    }
    const Output eval = noeira(d, "eval --params " + model.string() + " --data npy" + raw);
    expect_one_error_line(eval, lies[i].second);
    EXPECT_NE(eval.err.find(model.string()), std::string::npos) << eval.err;
  }
}

}  // namespace
}  // namespace noeira
