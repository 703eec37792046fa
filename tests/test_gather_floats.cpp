// The batch gather of a data set of float features (--data npy, train/batch.hpp): rows by the
// epoch's order and in file order are the data set's own floats, bit for bit, labels (or a
// regression's targets) alongside; an empty last batch reads nothing; a crop-flip of features that
// are no image is refused; a regression's spread is its targets' about their column means; rows
// streamed from a .npy file are the held rows; ids (a model's embedding's input) are gathered as
// ids, bit for bit; CUDA gathers what the CPU gathers.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "expect_error.hpp"
#include "gpu_skip.hpp"
#include "io/array_source.hpp"
#include "io_test_files.hpp"
#include "kernels/error.hpp"
#include "train/augment.hpp"
#include "train/batch.hpp"

namespace noeira {
namespace {

constexpr std::int64_t kFeatures = 5;

// `count` samples, feature j of sample i = i + j / 8 (exact in float), labels i % 3.
Dataset floats(std::int64_t count) {
  Dataset d;
  d.name = "npy/test";
  d.count = count;
  d.features = kFeatures;
  d.num_classes = 3;
  std::vector<float> values;
  for (std::int64_t i = 0; i < count; ++i) {
    d.labels.push_back(static_cast<std::int32_t>(i % 3));
    for (std::int64_t j = 0; j < kFeatures; ++j) {
      values.push_back(static_cast<float>(i) + static_cast<float>(j) / 8.0f);
    }
  }
  d.values = Tensor::from_host({count, kFeatures}, values);
  return d;
}

// Rows `rows` of d's features and labels, as the host holds them.
std::pair<std::vector<float>, std::vector<std::int32_t>> rows_of(const Dataset& d,
                                                                 const std::vector<int>& rows) {
  std::vector<float> x;
  std::vector<std::int32_t> labels;
  for (const int r : rows) {
    const float* row = d.values.data() + r * kFeatures;
    x.insert(x.end(), row, row + kFeatures);
    labels.push_back(d.labels[static_cast<std::size_t>(r)]);
  }
  return {x, labels};
}

// gather_batch on `target` of rows [begin, end) of `order` (file order when it is empty), done.
Batch gather(Target target, const ResidentData& data, const std::vector<std::int32_t>& order,
             RowRange rows) {
  Batch b(target);
  const Tensor resident = order.empty() ? Tensor() : resident_order(order, target);
  gather_batch(b, data, resident, rows);
  kernels_for(target).synchronize(nullptr);
  EXPECT_EQ(b.views_data, order.empty());
  return b;
}

// The batch's x and labels.
std::pair<std::vector<float>, std::vector<std::int32_t>> gathered(
    Target target, const ResidentData& data, const std::vector<std::int32_t>& order,
    RowRange rows) {
  const Batch b = gather(target, data, order, rows);
  return {b.x.to_vector(), b.labels.to_ids()};
}

TEST(GatherFloats, RowsAreTheDataSetsOwnFloatsInEitherOrder) {
  const Dataset d = floats(9);
  const ResidentData data = make_resident(d, Target::Cpu);
  EXPECT_EQ(data.pixels, nullptr);
  EXPECT_EQ(data.values.data(), d.values.data());  // on the CPU the split is held once
  const std::vector<std::int32_t> order = {8, 2, 2, 0, 5, 7, 1};
  EXPECT_EQ(gathered(Target::Cpu, data, order, RowRange{1, 6}), rows_of(d, {2, 2, 0, 5, 7}));
  EXPECT_EQ(gathered(Target::Cpu, data, {}, RowRange{4, 9}), rows_of(d, {4, 5, 6, 7, 8}));
  EXPECT_EQ(gathered(Target::Cpu, data, {}, RowRange{9, 9}), rows_of(d, {}));
}

TEST(GatherFloats, FeaturesThatAreNoImageAreNotCropped) {
  const ResidentData data = make_resident(floats(4), Target::Cpu);
  testing::expect_input_error([&] { (void)crop_flip_spec(data, 2, 1, 0); },
                              {"npy/test", "no image shape to crop"});
}

// floats(count) as a regression: targets [count, 2], target (i, c) = 10 i + c.
Dataset regression(std::int64_t count) {
  Dataset d = floats(count);
  d.labels.clear();
  d.num_classes = 0;
  d.target_width = 2;
  for (std::int64_t i = 0; i < count; ++i) {
    for (int c = 0; c < 2; ++c) d.targets.push_back(static_cast<float>(10 * i + c));
  }
  return d;
}

// The batch's x and a regression's targets.
std::pair<std::vector<float>, std::vector<float>> gathered_targets(
    Target target, const ResidentData& data, const std::vector<std::int32_t>& order,
    RowRange rows) {
  const Batch b = gather(target, data, order, rows);
  EXPECT_EQ(b.targets.dim(1), 2);
  return {b.x.to_vector(), b.targets.to_vector()};
}

TEST(GatherFloats, ARegressionsTargetsTravelWithTheirRows) {
  const ResidentData data = make_resident(regression(6), Target::Cpu);
  ASSERT_TRUE(data.regression());
  EXPECT_FALSE(data.labels.defined());
  // Columns 0, 10, ..., 50 and 1, 11, ..., 51, each about its mean (25 and 26): the same spread.
  double spread = 0.0;
  for (int i = 0; i < 6; ++i) spread += 2.0 * (10.0 * i - 25.0) * (10.0 * i - 25.0);
  EXPECT_DOUBLE_EQ(data.target_spread, spread);
  const auto by_order = gathered_targets(Target::Cpu, data, {5, 0, 3, 3}, RowRange{1, 4});
  EXPECT_EQ(by_order.second, (std::vector<float>{0, 1, 30, 31, 30, 31}));
  EXPECT_EQ(by_order.first, rows_of(floats(6), {0, 3, 3}).first);
  const auto in_order = gathered_targets(Target::Cpu, data, {}, RowRange{4, 6});
  EXPECT_EQ(in_order.second, (std::vector<float>{40, 41, 50, 51}));
  // A batch that viewed the data's targets gathers into storage of its own afterwards.
  Batch b;
  gather_batch(b, data, Tensor(), RowRange{0, 2});
  const std::vector<std::int32_t> order = {4, 1};
  gather_batch(b, data, resident_order(order, Target::Cpu), RowRange{0, 2});
  EXPECT_FALSE(b.views_data);
  EXPECT_EQ(b.targets.to_vector(), (std::vector<float>{40, 41, 10, 11}));
  EXPECT_EQ(data.targets.to_vector()[0], 0.0f);
}

// floats(count) streamed (--stream-data): its features written to `dir`/x.npy and read from there
// batch by batch, not held.
Dataset streamed(const testing::TempDir& dir, std::int64_t count) {
  Dataset d = floats(count);
  testing::write_npy_array(dir / "x.npy", "<f4", {count, kFeatures}, d.values.to_vector());
  d.values = Tensor();
  d.streamed = io::open_npy_source(dir / "x.npy");
  return d;
}

// Runs of consecutive rows, repeats and single rows, in both directions.
const std::vector<std::int32_t> kStreamOrder = {29, 3, 4, 5, 3, 0, 17, 18, 12, 5, 8, 21, 1};

TEST(GatherFloats, StreamedRowsAreTheHeldRows) {
  const testing::TempDir dir;
  const ResidentData held = make_resident(floats(30), Target::Cpu);
  const ResidentData read = make_resident(streamed(dir, 30), Target::Cpu);
  EXPECT_FALSE(read.values.defined());
  EXPECT_EQ(gathered(Target::Cpu, read, kStreamOrder, RowRange{0, 13}),
            gathered(Target::Cpu, held, kStreamOrder, RowRange{0, 13}));
  EXPECT_EQ(gathered(Target::Cpu, read, kStreamOrder, RowRange{2, 4}),
            gathered(Target::Cpu, held, kStreamOrder, RowRange{2, 4}));
  EXPECT_EQ(gathered(Target::Cpu, read, {}, RowRange{7, 30}),
            gathered(Target::Cpu, held, {}, RowRange{7, 30}));
  EXPECT_EQ(gathered(Target::Cpu, read, {}, RowRange{30, 30}), rows_of(floats(30), {}));
}

// Streamed rows on a device go through the host and one upload: the CPU's held rows, bit for bit.
TEST(CudaGatherFloats, StreamedRowsMatchTheCpuBitForBit) {
  NOEIRA_REQUIRE_GPU();
  const testing::TempDir dir;
  const ResidentData held = make_resident(floats(30), Target::Cpu);
  const ResidentData gpu = make_resident(streamed(dir, 30), Target::Cuda);
  EXPECT_EQ(gathered(Target::Cuda, gpu, kStreamOrder, RowRange{0, 13}),
            gathered(Target::Cpu, held, kStreamOrder, RowRange{0, 13}));
  EXPECT_EQ(gathered(Target::Cuda, gpu, {}, RowRange{7, 30}),
            gathered(Target::Cpu, held, {}, RowRange{7, 30}));
}

TEST(CudaGatherFloats, MatchesTheCpuBitForBit) {
  NOEIRA_REQUIRE_GPU();
  const Dataset d = floats(30);
  const ResidentData cpu = make_resident(d, Target::Cpu);
  const ResidentData gpu = make_resident(d, Target::Cuda);
  const std::vector<std::int32_t> order = {29, 3, 3, 0, 17, 12, 5, 8, 21, 1};
  EXPECT_EQ(gathered(Target::Cuda, gpu, order, RowRange{0, 10}),
            gathered(Target::Cpu, cpu, order, RowRange{0, 10}));
  EXPECT_EQ(gathered(Target::Cuda, gpu, {}, RowRange{7, 30}),
            gathered(Target::Cpu, cpu, {}, RowRange{7, 30}));
  const ResidentData cpu_targets = make_resident(regression(30), Target::Cpu);
  const ResidentData gpu_targets = make_resident(regression(30), Target::Cuda);
  EXPECT_EQ(gpu_targets.target_spread, cpu_targets.target_spread);
  EXPECT_EQ(gathered_targets(Target::Cuda, gpu_targets, order, RowRange{0, 10}),
            gathered_targets(Target::Cpu, cpu_targets, order, RowRange{0, 10}));
  EXPECT_EQ(gathered_targets(Target::Cuda, gpu_targets, {}, RowRange{7, 30}),
            gathered_targets(Target::Cpu, cpu_targets, {}, RowRange{7, 30}));
}

// `count` samples of kFeatures ids, id j of sample i = 1000 i + j (past a float's exact integers
// for no row here, but a gather must copy the bits, never convert them).
Dataset ids(std::int64_t count) {
  Dataset d = floats(count);
  std::vector<std::int32_t> values;
  for (std::int64_t i = 0; i < count; ++i) {
    for (std::int64_t j = 0; j < kFeatures; ++j) {
      values.push_back(static_cast<std::int32_t>(1000 * i + j) | (j == 4 ? 0x7fc00000 : 0));
    }
  }
  d.values = Tensor::from_host_ids({count, kFeatures}, values, Target::Cpu);
  return d;
}

std::vector<std::int32_t> gathered_ids(Target target, const ResidentData& data,
                                       const std::vector<std::int32_t>& order, RowRange rows) {
  const Batch b = gather(target, data, order, rows);
  EXPECT_EQ(b.x.dtype(), DType::I32);
  return b.x.to_ids();
}

TEST(GatherIds, RowsAreTheIdsBitForBitInEitherOrder) {
  const Dataset d = ids(9);
  const ResidentData data = make_resident(d, Target::Cpu);
  const std::vector<std::int32_t> all = d.values.to_ids();
  auto rows = [&](const std::vector<int>& which) {
    std::vector<std::int32_t> out;
    for (const int r : which) {
      out.insert(out.end(), all.begin() + r * kFeatures, all.begin() + (r + 1) * kFeatures);
    }
    return out;
  };
  EXPECT_EQ(gathered_ids(Target::Cpu, data, {8, 2, 2, 0}, RowRange{1, 4}), rows({2, 2, 0}));
  EXPECT_EQ(gathered_ids(Target::Cpu, data, {}, RowRange{3, 6}), rows({3, 4, 5}));
}

TEST(CudaGatherIds, MatchesTheCpuBitForBit) {
  NOEIRA_REQUIRE_GPU();
  const Dataset d = ids(30);
  const ResidentData cpu = make_resident(d, Target::Cpu);
  const ResidentData gpu = make_resident(d, Target::Cuda);
  const std::vector<std::int32_t> order = {29, 3, 3, 0, 17, 12, 5, 8, 21, 1};
  EXPECT_EQ(gathered_ids(Target::Cuda, gpu, order, RowRange{0, 10}),
            gathered_ids(Target::Cpu, cpu, order, RowRange{0, 10}));
  EXPECT_EQ(gathered_ids(Target::Cuda, gpu, {}, RowRange{7, 30}),
            gathered_ids(Target::Cpu, cpu, {}, RowRange{7, 30}));
}

}  // namespace
}  // namespace noeira
