// The batch gather of a data set of float features (--data npy, train/batch.hpp): rows by the
// epoch's order and in file order are the data set's own floats, bit for bit, labels alongside; an
// empty last batch reads nothing; a crop-flip of features that are no image is refused; CUDA
// gathers what the CPU gathers.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "expect_error.hpp"
#include "gpu_skip.hpp"
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
  d.float_features = true;
  for (std::int64_t i = 0; i < count; ++i) {
    d.labels.push_back(static_cast<std::int32_t>(i % 3));
    for (std::int64_t j = 0; j < kFeatures; ++j) {
      d.values.push_back(static_cast<float>(i) + static_cast<float>(j) / 8.0f);
    }
  }
  return d;
}

// Rows `rows` of d's features and labels, as the host holds them.
std::pair<std::vector<float>, std::vector<std::int32_t>> rows_of(const Dataset& d,
                                                                 const std::vector<int>& rows) {
  std::vector<float> x;
  std::vector<std::int32_t> labels;
  for (const int r : rows) {
    x.insert(x.end(), d.values.begin() + r * kFeatures, d.values.begin() + (r + 1) * kFeatures);
    labels.push_back(d.labels[static_cast<std::size_t>(r)]);
  }
  return {x, labels};
}

// gather_batch on `target` of rows [begin, end) of `order` (file order when it is empty).
std::pair<std::vector<float>, std::vector<std::int32_t>> gathered(
    Target target, const ResidentData& data, const std::vector<std::int32_t>& order,
    RowRange rows) {
  Batch b(target);
  const Tensor resident = order.empty() ? Tensor() : resident_order(order, target);
  gather_batch(b, data, resident, rows);
  kernels_for(target).synchronize(nullptr);
  EXPECT_EQ(b.views_data, order.empty());
  return {b.x.to_vector(), b.labels.to_ids()};
}

TEST(GatherFloats, RowsAreTheDataSetsOwnFloatsInEitherOrder) {
  const Dataset d = floats(9);
  const ResidentData data = make_resident(d, Target::Cpu);
  EXPECT_EQ(data.pixels, nullptr);
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
}

}  // namespace
}  // namespace noeira
