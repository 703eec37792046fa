// The data file readers of io/: good files of each kind (plain and gzip) read back exactly; each
// kind of bad file (missing, truncated, wrong magic, wrong counts, stray bytes, bad labels) is an
// InputError whose message names the file and what was expected.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "byte_data.hpp"
#include "io/cifar.hpp"
#include "io/idx.hpp"
#include "expect_error.hpp"
#include "io_test_files.hpp"
#include "kernels/error.hpp"
#include "train/dataset.hpp"

namespace noeira {
namespace {

using testing::TempDir;
using testing::expect_input_error;
using testing::idx_images_bytes;
using testing::idx_labels_bytes;
using testing::pattern;
using testing::write_bytes;

class IdxReader : public ::testing::TestWithParam<bool> {};  // parameter: gzip

TEST_P(IdxReader, ReadsImagesAndLabelsExactly) {
  const bool gz = GetParam();
  TempDir dir;
  const auto pixels = pattern(3 * 4 * 5);
  write_bytes(dir / "img", idx_images_bytes(3, 4, 5, pixels), gz);
  write_bytes(dir / "lab", idx_labels_bytes(3, {7, 0, 9}), gz);
  const io::IdxImages images = io::read_idx_images(dir / "img");
  EXPECT_EQ(images.count, 3);
  EXPECT_EQ(images.rows, 4);
  EXPECT_EQ(images.cols, 5);
  EXPECT_EQ(images.pixels, pixels);
  EXPECT_EQ(io::read_idx_labels(dir / "lab", 10), (std::vector<std::uint8_t>{7, 0, 9}));
}

TEST_P(IdxReader, TruncatedFileNamesFileAndExpectedSize) {
  const bool gz = GetParam();
  TempDir dir;
  auto pixels = pattern(3 * 4 * 5);
  pixels.resize(pixels.size() - 7);  // the header promises more than there is
  write_bytes(dir / "img", idx_images_bytes(3, 4, 5, pixels), gz);
  expect_input_error([&] { io::read_idx_images(dir / "img"); },
                     {(dir / "img").string(), "truncated", "3 images of 4x5"});
  write_bytes(dir / "lab", idx_labels_bytes(5, {1, 2}), gz);
  expect_input_error([&] { io::read_idx_labels(dir / "lab", 10); },
                     {(dir / "lab").string(), "truncated", "5 labels"});
  // Cut inside the header itself.
  write_bytes(dir / "short", {0, 0, 8}, gz);
  expect_input_error([&] { io::read_idx_images(dir / "short"); },
                     {(dir / "short").string(), "truncated", "magic"});
}

// A header that claims more than the file can hold is refused before the data is allocated:
// a 33-byte gzip file claiming 4194304 images of 64x64 made every rank allocate 16 GiB, and three
// dimensions of 2^28 wrapped int64.
TEST_P(IdxReader, HeaderClaimingMoreThanTheFileHoldsIsRefusedUpFront) {
  const bool gz = GetParam();
  TempDir dir;
  write_bytes(dir / "img", idx_images_bytes(4194304, 64, 64, pattern(1)), gz);
  expect_input_error([&] { io::read_idx_images(dir / "img"); },
                     {(dir / "img").string(), "4194304 images of 64x64", "more than a file of"});
  write_bytes(dir / "wide", idx_images_bytes(1u << 28, 1u << 28, 1u << 28, pattern(1)), gz);
  expect_input_error([&] { io::read_idx_images(dir / "wide"); },
                     {(dir / "wide").string(), "images of 268435456x268435456"});
  write_bytes(dir / "lab", idx_labels_bytes(1u << 28, {1, 2}), gz);
  expect_input_error([&] { io::read_idx_labels(dir / "lab", 10); },
                     {(dir / "lab").string(), "268435456 labels", "more than a file of"});
}

TEST_P(IdxReader, WrongMagicNamesBothMagics) {
  const bool gz = GetParam();
  TempDir dir;
  write_bytes(dir / "lab", idx_labels_bytes(2, {1, 2}), gz);
  // A labels file given as images.
  expect_input_error([&] { io::read_idx_images(dir / "lab"); },
                     {(dir / "lab").string(), "magic 0x00000801", "expected 0x00000803"});
  write_bytes(dir / "img", idx_images_bytes(1, 2, 2, pattern(4)), gz);
  expect_input_error([&] { io::read_idx_labels(dir / "img", 10); },
                     {(dir / "img").string(), "magic 0x00000803", "expected 0x00000801"});
  // Not an IDX file at all.
  write_bytes(dir / "text", {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'}, gz);
  expect_input_error([&] { io::read_idx_images(dir / "text"); },
                     {(dir / "text").string(), "not an IDX images file"});
}

TEST_P(IdxReader, StrayBytesAfterTheDataAreAnError) {
  const bool gz = GetParam();
  TempDir dir;
  auto pixels = pattern(2 * 2 * 2 + 1);  // one byte more than 2 images of 2x2
  write_bytes(dir / "img", idx_images_bytes(2, 2, 2, pixels), gz);
  expect_input_error([&] { io::read_idx_images(dir / "img"); },
                     {(dir / "img").string(), "past the end"});
}

TEST_P(IdxReader, LabelOutOfRangeAndZeroCountAreErrors) {
  const bool gz = GetParam();
  TempDir dir;
  write_bytes(dir / "lab", idx_labels_bytes(3, {1, 10, 2}), gz);
  expect_input_error([&] { io::read_idx_labels(dir / "lab", 10); },
                     {(dir / "lab").string(), "label 10 at index 1", "0..9"});
  write_bytes(dir / "img", idx_images_bytes(0, 28, 28, {}), gz);
  expect_input_error([&] { io::read_idx_images(dir / "img"); },
                     {(dir / "img").string(), "image count 0"});
}

INSTANTIATE_TEST_SUITE_P(PlainAndGzip, IdxReader, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "gzip" : "plain"; });

TEST(IdxReader, MissingFileNamesIt) {
  TempDir dir;
  expect_input_error([&] { io::read_idx_images(dir / "nope"); },
                     {(dir / "nope").string(), "not found"});
  expect_input_error([&] { io::find_idx_file(dir.path(), "train-images-idx3-ubyte"); },
                     {(dir / "train-images-idx3-ubyte.gz").string(), "not found"});
}

TEST(IdxReader, CorruptGzipIsAnError) {
  TempDir dir;
  write_bytes(dir / "img.gz", idx_images_bytes(4, 28, 28, pattern(4 * 784)), true);
  // Flip bytes in the middle of the deflate stream (past the 10-byte gzip header).
  std::vector<std::uint8_t> raw;
  {
    std::ifstream in(dir / "img.gz", std::ios::binary);
    raw.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(raw.size(), 40u);
  for (std::size_t i = 20; i < 30; ++i) raw[i] ^= 0xA5;
  write_bytes(dir / "img.gz", raw, false);
  EXPECT_THROW(io::read_idx_images(dir / "img.gz"), InputError);
}

// The data set layer checks what the file layer cannot: sizes and that labels match images.
TEST(IdxDataset, LoadsAndNormalizesAGoodDirectory) {
  TempDir dir;
  testing::write_tiny_mnist(dir.path(), 20, 10, /*gzip=*/true);
  const Dataset d = load_dataset(DatasetKind::FashionMnist, dir.path(), Split::Train);
  EXPECT_EQ(d.count, 20);
  EXPECT_EQ(d.features, 784);
  EXPECT_EQ(d.num_classes, 10);
  ASSERT_EQ(d.pixels.size(), 20u * 784u);
  // Pixel 0 of image 0 is 11 (pattern), class 0 bright rows start at 0: 200 + 11 % 50 = 211.
  EXPECT_EQ(d.pixels[0], 211);
  EXPECT_EQ(d.mean, std::vector<float>{0.2860f});
  EXPECT_EQ(d.std, std::vector<float>{0.3530f});
  EXPECT_NEAR(testing::float_path_images(d)[0], (211.0f / 255.0f - 0.2860f) / 0.3530f, 1e-5f);
  EXPECT_EQ(d.labels[13], 3);
  const Dataset t = load_dataset(DatasetKind::FashionMnist, dir.path(), Split::Test, 4);
  EXPECT_EQ(t.count, 4);
  EXPECT_EQ(t.pixels.size(), 4u * 784u);
  EXPECT_EQ(t.pixels.capacity(), 4u * 784u);  // the rest of the split is freed
  EXPECT_EQ(t.labels, (std::vector<std::int32_t>{3, 4, 5, 6}));
  // MNIST reads the same layout with its own statistics.
  const Dataset m = load_dataset(DatasetKind::Mnist, dir.path(), Split::Train);
  EXPECT_NEAR(testing::float_path_images(m)[0], (211.0f / 255.0f - 0.1307f) / 0.3081f, 1e-5f);
}

TEST(IdxDataset, MismatchedCountsAndSizesAreErrors) {
  TempDir dir;
  testing::write_tiny_mnist(dir.path(), 5, 5, false);
  write_bytes(dir / "train-labels-idx1-ubyte", idx_labels_bytes(4, {1, 2, 3, 4}), false);
  expect_input_error([&] { load_dataset(DatasetKind::Mnist, dir.path(), Split::Train); },
                     {(dir / "train-labels-idx1-ubyte").string(), "4 labels for the 5 images"});
  write_bytes(dir / "t10k-images-idx3-ubyte", idx_images_bytes(5, 32, 32, pattern(5 * 1024)),
              false);
  expect_input_error([&] { load_dataset(DatasetKind::Mnist, dir.path(), Split::Test); },
                     {(dir / "t10k-images-idx3-ubyte").string(), "32x32", "expected 28x28"});
  testing::write_tiny_mnist(dir.path(), 5, 5, false);
  expect_input_error(
      [&] { load_dataset(DatasetKind::Mnist, dir.path(), Split::Train, 6); },
      {"mnist/train", "limit 6", "5 samples"});
  expect_input_error(
      [&] { load_dataset(DatasetKind::Mnist, dir / "missing", Split::Train); },
      {(dir / "missing" / "train-images-idx3-ubyte.gz").string(), "not found"});
}

TEST(CifarReader, ReadsRecordsAndAppendsBatches) {
  TempDir dir;
  std::vector<std::uint8_t> bytes;
  const auto pixels = pattern(2 * 3072);
  for (int r = 0; r < 2; ++r) {
    bytes.push_back(static_cast<std::uint8_t>(r == 0 ? 9 : 4));
    bytes.insert(bytes.end(), pixels.begin() + r * 3072, pixels.begin() + (r + 1) * 3072);
  }
  write_bytes(dir / "b1.bin", bytes, false);
  io::CifarBatch batch;
  io::read_cifar_batch(dir / "b1.bin", batch);
  io::read_cifar_batch(dir / "b1.bin", batch);
  EXPECT_EQ(batch.count, 4);
  EXPECT_EQ(batch.labels, (std::vector<std::uint8_t>{9, 4, 9, 4}));
  ASSERT_EQ(batch.pixels.size(), 4u * 3072u);
  EXPECT_TRUE(std::equal(pixels.begin(), pixels.end(), batch.pixels.begin()));
  EXPECT_TRUE(std::equal(pixels.begin(), pixels.end(), batch.pixels.begin() + 2 * 3072));
}

TEST(CifarReader, BadFilesAreErrorsNamingThem) {
  TempDir dir;
  io::CifarBatch batch;
  expect_input_error([&] { io::read_cifar_batch(dir / "none.bin", batch); },
                     {(dir / "none.bin").string(), "not found"});
  write_bytes(dir / "short.bin", std::vector<std::uint8_t>(3073 + 100, 1), false);
  expect_input_error([&] { io::read_cifar_batch(dir / "short.bin", batch); },
                     {(dir / "short.bin").string(), "3173 bytes", "multiple", "3073"});
  write_bytes(dir / "empty.bin", {}, false);
  expect_input_error([&] { io::read_cifar_batch(dir / "empty.bin", batch); },
                     {(dir / "empty.bin").string(), "0 bytes"});
  std::vector<std::uint8_t> bad(3073, 0);
  bad[0] = 10;
  write_bytes(dir / "label.bin", bad, false);
  expect_input_error([&] { io::read_cifar_batch(dir / "label.bin", batch); },
                     {(dir / "label.bin").string(), "label 10"});
  EXPECT_EQ(batch.count, 0);
}

TEST(CifarDataset, LoadsTrainAndTestSplits) {
  TempDir dir;
  std::vector<std::uint8_t> rec(3073, 255);
  for (int i = 1; i <= 5; ++i) {
    rec[0] = static_cast<std::uint8_t>(i);
    write_bytes(dir / ("data_batch_" + std::to_string(i) + ".bin"), rec, false);
  }
  rec[0] = 0;
  write_bytes(dir / "test_batch.bin", rec, false);
  const Dataset train = load_dataset(DatasetKind::Cifar10, dir.path(), Split::Train);
  EXPECT_EQ(train.count, 5);
  EXPECT_EQ(train.features, 3072);
  EXPECT_EQ(train.labels, (std::vector<std::int32_t>{1, 2, 3, 4, 5}));
  // White: channel 0 normalizes with red's statistics, channel 2 with blue's.
  const std::vector<float> inputs = testing::float_path_images(train);
  EXPECT_NEAR(inputs[0], (1.0f - 0.4914f) / 0.2470f, 1e-5f);
  EXPECT_NEAR(inputs[2048], (1.0f - 0.4465f) / 0.2616f, 1e-5f);
  EXPECT_EQ(train.pixels.capacity(), 5u * 3072u);  // no slack left from the appends
  std::filesystem::remove(dir / "data_batch_3.bin");
  expect_input_error([&] { load_dataset(DatasetKind::Cifar10, dir.path(), Split::Train); },
                     {(dir / "data_batch_3.bin").string(), "not found"});
}

// The real data set, when installed (Debian's dataset-fashion-mnist).
TEST(FashionMnist, RealFilesHaveTheExpectedShape) {
  const std::filesystem::path dir = default_data_dir(DatasetKind::FashionMnist);
  if (!std::filesystem::exists(dir / "train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not installed at " << dir << " (apt install dataset-fashion-mnist)";
  }
  const Dataset train = load_dataset(DatasetKind::FashionMnist, dir, Split::Train);
  const Dataset test = load_dataset(DatasetKind::FashionMnist, dir, Split::Test);
  EXPECT_EQ(train.count, 60000);
  EXPECT_EQ(test.count, 10000);
  EXPECT_EQ(train.features, 28 * 28);
  std::vector<std::int64_t> per_class(10, 0);
  for (std::int32_t y : train.labels) {
    ASSERT_GE(y, 0);
    ASSERT_LE(y, 9);
    ++per_class[static_cast<std::size_t>(y)];
  }
  for (std::int64_t c : per_class) EXPECT_EQ(c, 6000);  // Fashion-MNIST is balanced
  // The normalization constants are the training split's statistics: mean ~0, std ~1.
  double sum = 0.0, sq = 0.0;
  const float scale = testing::float_path_scale(train, 0);
  const float shift = testing::float_path_shift(train, 0);
  for (std::uint8_t b : train.pixels) {
    const float v = static_cast<float>(b) * scale + shift;
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(train.pixels.size());
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sq / n - (sum / n) * (sum / n)), 1.0, 0.01);
}

}  // namespace
}  // namespace noeira
