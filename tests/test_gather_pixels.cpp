// The batch gather of a resident data set of bytes (kernel gather_pixels, train/batch.hpp): every
// input it writes has the bits of the float path the data sets took before they were held as
// bytes (normalized when loaded, then gathered), for every byte under every data set's
// statistics, by index and in file order; a row outside the table is poisoned; a data set handed
// over to the CPU is not copied; CUDA writes what the CPU writes, bit for bit, plain and
// crop-flipped. The crop-flip geometry itself: test_augment.cpp.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "byte_data.hpp"
#include "expect_error.hpp"
#include "gpu_skip.hpp"
#include "kernels/cpu/vector_isa.hpp"
#include "kernels/error.hpp"
#include "train/augment.hpp"
#include "train/batch.hpp"

namespace noeira {
namespace {

constexpr ImageShape kImage{3, 4, 6};  // 24 pixels a plane, 72 a sample

// `count` samples under `kind`'s statistics, channels as kind's (1 or 3), a plane of
// kImage.pixels(): pixel i is byte (i · 7) mod 256, so 256 consecutive pixels hold every byte.
Dataset bytes_under(DatasetKind kind, std::int64_t count) {
  const PixelStats stats = pixel_stats(kind);
  Dataset d;
  d.name = detail::concat("bytes/", to_string(kind));
  d.count = count;
  d.image = ImageShape{stats.image.channels, kImage.height, kImage.width};
  d.features = d.image.numel();
  d.num_classes = 3;
  d.mean.assign(stats.mean.begin(), stats.mean.end());
  d.std.assign(stats.std.begin(), stats.std.end());
  for (std::int64_t i = 0; i < count * d.features; ++i) {
    d.pixels.push_back(static_cast<std::uint8_t>(i * 7));
  }
  for (std::int64_t s = 0; s < count; ++s) d.labels.push_back(static_cast<std::int32_t>(s % 3));
  return d;
}

// The float path's rows index[r], a row outside [0, count) all poison words.
std::vector<std::uint32_t> float_path_rows(const Dataset& d,
                                           const std::vector<std::int32_t>& index) {
  const std::vector<float> images = testing::float_path_images(d);
  std::vector<std::uint32_t> out;
  for (std::int32_t row : index) {
    for (std::int64_t f = 0; f < d.features; ++f) {
      out.push_back(row < 0 || row >= d.count
                        ? kPoisonWord
                        : std::bit_cast<std::uint32_t>(images[row * d.features + f]));
    }
  }
  return out;
}

std::vector<std::uint32_t> bits_of(const Tensor& x) {
  std::vector<std::uint32_t> out;
  for (float v : x.to_vector()) out.push_back(std::bit_cast<std::uint32_t>(v));
  return out;
}

// gather_pixels of rows `index` (all of the table's rows in order when index is empty).
Tensor gather_on(Target target, const ResidentData& data, const std::vector<std::int32_t>& index,
                 const CropFlip* augment = nullptr) {
  const Tensor ids =
      Tensor::from_host_ids({static_cast<std::int64_t>(index.size())}, index, target);
  const std::int64_t rows = index.empty() ? data.count : ids.numel();
  Tensor out({rows, data.features}, target);
  kernels_for(target).gather_pixels(nullptr, out.data(), index.empty() ? nullptr : ids.ids(),
                                    data.pixels.get(), rows, data.features, data.count,
                                    data.normalization, augment);
  return out;
}

constexpr DatasetKind kKinds[] = {DatasetKind::FashionMnist, DatasetKind::Mnist,
                                  DatasetKind::Cifar10};

TEST(GatherPixels, RowsAreTheFloatPathBitForBitAndBadRowsArePoisoned) {
  for (DatasetKind kind : kKinds) {
    const Dataset d = bytes_under(kind, 12);  // 864 or 288 pixels: every byte, in every channel
    const ResidentData data = make_resident(d, Target::Cpu);
    const std::vector<std::int32_t> index = {11, 3, 3, 0, -1, 12, 7, -2147483647 - 1, 5};
    // Every vector width the CPU runs (the plain rows' loop is vector_isa.hpp's).
    using cpu::VectorIsa;
    for (VectorIsa isa : {VectorIsa::Sse2, VectorIsa::Avx2, VectorIsa::Avx512}) {
      if (static_cast<int>(isa) > static_cast<int>(cpu::best_vector_isa())) continue;
      cpu::set_vector_isa(isa);
      EXPECT_EQ(bits_of(gather_on(Target::Cpu, data, index)), float_path_rows(d, index))
          << to_string(kind) << ", vector isa " << static_cast<int>(isa);
    }
    cpu::set_vector_isa(cpu::best_vector_isa());
  }
}

TEST(GatherPixels, FileOrderIsTheFloatPathAndLabelsAreViews) {
  const Dataset d = bytes_under(DatasetKind::Cifar10, 9);
  const ResidentData data = make_resident(d, Target::Cpu);
  EXPECT_EQ(bits_of(gather_on(Target::Cpu, data, {})),
            float_path_rows(d, {0, 1, 2, 3, 4, 5, 6, 7, 8}));
  // Through gather_batch, from a row inside the table (the kernel sees an offset table).
  Batch b;
  gather_batch(b, data, Tensor(), RowRange{4, 9});
  EXPECT_EQ(bits_of(b.x), float_path_rows(d, {4, 5, 6, 7, 8}));
  EXPECT_TRUE(b.views_data);
  EXPECT_EQ(b.labels.to_ids(), (std::vector<std::int32_t>{1, 2, 0, 1, 2}));
  gather_batch(b, data, Tensor(), RowRange{9, 9});  // an empty last batch reads nothing
  EXPECT_EQ(b.x.dim(0), 0);
}

TEST(GatherPixels, ADatasetHandedOverKeepsItsBytesOnTheCpu) {
  Dataset d = bytes_under(DatasetKind::Cifar10, 4);
  const std::uint8_t* bytes = d.pixels.data();
  const std::vector<std::uint32_t> want = float_path_rows(d, {3, 0});
  const ResidentData kept = make_resident(d, Target::Cpu);  // the caller's: copied
  EXPECT_NE(kept.pixels.get(), bytes);
  const ResidentData moved = make_resident(std::move(d), Target::Cpu);
  EXPECT_EQ(moved.pixels.get(), bytes);  // the split is held once
  EXPECT_EQ(bits_of(gather_on(Target::Cpu, kept, {3, 0})), want);
  EXPECT_EQ(bits_of(gather_on(Target::Cpu, moved, {3, 0})), want);
}

TEST(GatherPixels, StatisticsThatDoNotFitTheSamplesAreRefused) {
  Dataset d = bytes_under(DatasetKind::Cifar10, 2);  // 72 features
  const auto channels = [&](std::size_t n) {
    d.mean.assign(n, 0.5f);
    d.std.assign(n, 0.5f);
  };
  const auto refused = [&](std::string words) {
    testing::expect_input_error([&] { (void)make_resident(d, Target::Cpu); }, {d.name, words});
  };
  channels(5);  // 72 features are not 5 planes
  refused("5 means and 5 standard deviations for samples of 72 features");
  channels(0);
  refused("0 means");
  channels(3);
  d.std.pop_back();
  refused("3 means and 2 standard deviations");
  channels(6);  // 6 planes of 12, more channels than the kernels normalize
  refused("6 channels, more than the 4");
}

TEST(CudaGatherPixels, MatchesTheCpuBitForBit) {
  NOEIRA_REQUIRE_GPU();
  // Sample ids out of order, repeated and out of range (poisoned on both).
  const std::vector<std::int32_t> index = {29, 3, 3, 0, 17, -2, 30, 12, 5, 8, 21, 1};
  for (DatasetKind kind : kKinds) {
    const Dataset d = bytes_under(kind, 30);
    const ResidentData cpu = make_resident(d, Target::Cpu);
    const ResidentData gpu = make_resident(d, Target::Cuda);
    const std::string what(to_string(kind));
    EXPECT_EQ(bits_of(gather_on(Target::Cuda, gpu, index)),
              bits_of(gather_on(Target::Cpu, cpu, index)))
        << what << ", rows";
    EXPECT_EQ(bits_of(gather_on(Target::Cuda, gpu, {})), bits_of(gather_on(Target::Cpu, cpu, {})))
        << what << ", file order";
    for (std::int64_t epoch : {0, 3}) {
      const CropFlip spec = crop_flip_spec(cpu, /*padding=*/2, /*seed=*/5, epoch);
      EXPECT_EQ(bits_of(gather_on(Target::Cuda, gpu, index, &spec)),
                bits_of(gather_on(Target::Cpu, cpu, index, &spec)))
          << what << ", crop-flip epoch " << epoch;
    }
  }
}

}  // namespace
}  // namespace noeira
