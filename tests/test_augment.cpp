// Image augmentation (train/augment.hpp, kernel gather_pixels): the draws are a pure function of
// (seed, epoch, sample) and cover every offset and both flips; a crafted image moves by the drawn
// offset and mirrors, against a reference that normalizes as the data sets did when they were
// held as floats, then pads, crops and flips explicitly; the padding is the normalized black
// pixel; the training batch of a sample is the same for any rank count and batch position;
// `none` is the plain gather. CUDA against the CPU: test_gather_pixels.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "byte_data.hpp"
#include "expect_error.hpp"
#include "io_test_files.hpp"
#include "kernels/augment_math.hpp"
#include "kernels/error.hpp"
#include "train/augment.hpp"
#include "train/supervised.hpp"

namespace noeira {
namespace {

constexpr ImageShape kImage{3, 5, 7};  // odd and unequal sides: rows and columns cannot swap
constexpr std::int64_t kPadding = 2;

// Pixel (c, y, x) of sample s: a byte no other pixel of the sample has, and never black (the
// padding's), shifted by the sample so that samples differ.
std::uint8_t pixel_byte(std::int64_t s, std::int64_t c, std::int64_t y, std::int64_t x) {
  return static_cast<std::uint8_t>(1 + (s * 13 + c * kImage.pixels() + y * kImage.width + x) % 255);
}

Dataset crafted(std::int64_t count) {
  Dataset d;
  d.name = "crafted";
  d.count = count;
  d.image = kImage;
  d.features = kImage.numel();
  d.num_classes = 2;
  d.mean = {0.25f, 0.5f, 0.75f};  // black normalizes to -0.5, -2, -6
  d.std = {0.5f, 0.25f, 0.125f};
  for (std::int64_t s = 0; s < count; ++s) {
    d.labels.push_back(static_cast<std::int32_t>(s % 2));
    for (std::int64_t c = 0; c < kImage.channels; ++c) {
      for (std::int64_t y = 0; y < kImage.height; ++y) {
        for (std::int64_t x = 0; x < kImage.width; ++x) d.pixels.push_back(pixel_byte(s, c, y, x));
      }
    }
  }
  return d;
}

CropFlip spec_for(const ResidentData& data, std::uint64_t seed = 7, std::int64_t epoch = 0) {
  return crop_flip_spec(data, kPadding, seed, epoch);
}

// torchvision's order written out on the images normalized as floats: pad every side with the
// black pixel's value, crop at (top, left), mirror.
std::vector<float> reference_crop_flip(const Dataset& d, std::int64_t s, const CropFlipDraw& draw,
                                       std::int64_t padding = kPadding) {
  const std::int64_t H = d.image.height, W = d.image.width, P = padding;
  const std::vector<float> images = testing::float_path_images(d);
  std::vector<float> out;
  for (std::int64_t c = 0; c < d.image.channels; ++c) {
    const float black = testing::float_path_shift(d, static_cast<std::size_t>(c));
    std::vector<std::vector<float>> padded(H + 2 * P, std::vector<float>(W + 2 * P, black));
    for (std::int64_t y = 0; y < H; ++y) {
      for (std::int64_t x = 0; x < W; ++x) {
        padded[y + P][x + P] = images[s * d.features + (c * H + y) * W + x];
      }
    }
    for (std::int64_t y = 0; y < H; ++y) {
      std::vector<float> row(padded[draw.top + y].begin() + draw.left,
                             padded[draw.top + y].begin() + draw.left + W);
      if (draw.flip) std::reverse(row.begin(), row.end());
      out.insert(out.end(), row.begin(), row.end());
    }
  }
  return out;
}

std::vector<float> gather_on(Target target, const ResidentData& data,
                             const std::vector<std::int32_t>& index, const CropFlip& spec) {
  const Tensor ids = Tensor::from_host_ids({static_cast<std::int64_t>(index.size())}, index, target);
  Tensor out({static_cast<std::int64_t>(index.size()), data.features}, target);
  kernels_for(target).gather_pixels(nullptr, out.data(), ids.ids(), data.pixels.get(),
                                    ids.numel(), data.features, data.count, data.normalization,
                                    &spec);
  return out.to_vector();
}

// Bit for bit: the float path's values, padding included, are what the kernel must write.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
        << what << ", element " << i << ": " << got[i] << " against " << want[i];
  }
}

TEST(CropFlipDraw, IsAFunctionOfSeedEpochAndSampleAndCoversEveryChoice) {
  CropFlip spec;
  spec.seed = 3;
  spec.padding = 4;
  std::set<std::int64_t> tops, lefts;
  std::int64_t flips = 0;
  constexpr std::int64_t kSamples = 20000;
  for (std::int64_t s = 0; s < kSamples; ++s) {
    const CropFlipDraw d = crop_flip_draw(spec, s);
    ASSERT_GE(d.top, 0);
    ASSERT_LE(d.top, 2 * spec.padding);
    ASSERT_GE(d.left, 0);
    ASSERT_LE(d.left, 2 * spec.padding);
    tops.insert(d.top);
    lefts.insert(d.left);
    flips += d.flip ? 1 : 0;
    const CropFlipDraw again = crop_flip_draw(spec, s);
    ASSERT_TRUE(again.top == d.top && again.left == d.left && again.flip == d.flip);
  }
  EXPECT_EQ(tops.size(), 9u);
  EXPECT_EQ(lefts.size(), 9u);
  // Binomial(20000, 1/2): 5 standard deviations are 354.
  EXPECT_NEAR(static_cast<double>(flips), kSamples / 2.0, 354.0);
  // Another epoch or another seed draws anew: most samples change.
  CropFlip next_epoch = spec, other_seed = spec;
  next_epoch.epoch = 1;
  other_seed.seed = 4;
  for (const CropFlip& other : {next_epoch, other_seed}) {
    std::int64_t same = 0;
    for (std::int64_t s = 0; s < 1000; ++s) {
      const CropFlipDraw a = crop_flip_draw(spec, s), b = crop_flip_draw(other, s);
      same += a.top == b.top && a.left == b.left && a.flip == b.flip ? 1 : 0;
    }
    EXPECT_LT(same, 50);  // 1000 / 162 expected
  }
}

TEST(GatherCropFlip, CraftedImagesMoveByTheDrawnOffsetAndMirror) {
  const Dataset d = crafted(40);
  const ResidentData data = make_resident(d, Target::Cpu);
  const CropFlip spec = spec_for(data);
  std::vector<std::int32_t> index(40);
  for (std::int32_t i = 0; i < 40; ++i) index[i] = 39 - i;
  const std::vector<float> got = gather_on(Target::Cpu, data, index, spec);
  bool flipped = false, shifted = false, unflipped = false;
  for (std::size_t r = 0; r < index.size(); ++r) {
    const CropFlipDraw draw = crop_flip_draw(spec, index[r]);
    flipped |= draw.flip;
    unflipped |= !draw.flip;
    shifted |= draw.top != kPadding || draw.left != kPadding;
    const std::vector<float> want = reference_crop_flip(d, index[r], draw);
    const std::vector<float> row(got.begin() + r * d.features, got.begin() + (r + 1) * d.features);
    expect_same_bits(row, want,
                     detail::concat("sample ", index[r], " top ", draw.top, " left ", draw.left,
                                    " flip ", draw.flip));
  }
  // Not vacuous: the batch holds flipped, unflipped and shifted images.
  EXPECT_TRUE(flipped && unflipped && shifted);
}

TEST(GatherCropFlip, OnePixelLandsWhereTheDrawSays) {
  // A black image with one white pixel at the centre (2, 3) of channel 1, which no offset of at
  // most the padding moves out of the image, as its 16 copies are augmented.
  constexpr std::int64_t kCopies = 16, kY = 2, kX = 3;
  Dataset d = crafted(kCopies);
  std::fill(d.pixels.begin(), d.pixels.end(), std::uint8_t{0});  // the padding is black too
  const std::int64_t plane = kImage.pixels();
  for (std::int64_t s = 0; s < kCopies; ++s) d.pixels[s * d.features + plane + kY * 7 + kX] = 255;
  const float black[3] = {-0.5f, -2.0f, -6.0f};
  const float white = 255.0f * testing::float_path_scale(d, 1) + testing::float_path_shift(d, 1);
  const ResidentData data = make_resident(d, Target::Cpu);
  const CropFlip spec = spec_for(data, /*seed=*/11);
  std::vector<std::int32_t> index(kCopies);
  for (std::int32_t i = 0; i < kCopies; ++i) index[i] = i;
  const std::vector<float> got = gather_on(Target::Cpu, data, index, spec);
  std::set<std::int64_t> places;
  for (std::int64_t s = 0; s < kCopies; ++s) {
    const CropFlipDraw draw = crop_flip_draw(spec, s);
    const std::int64_t y = kY + kPadding - draw.top;
    const std::int64_t shifted_x = kX + kPadding - draw.left;
    const std::int64_t x = draw.flip ? kImage.width - 1 - shifted_x : shifted_x;
    const std::int64_t at = plane + y * kImage.width + x;
    places.insert(at);
    for (std::int64_t i = 0; i < d.features; ++i) {
      EXPECT_EQ(got[s * d.features + i], i == at ? white : black[i / plane])
          << "sample " << s << " at " << i;
    }
  }
  EXPECT_GT(places.size(), 5u);  // the copies went to different places
}

TEST(GatherCropFlip, PaddingIsTheBlackPixelAndBadRowsArePoisoned) {
  const Dataset d = crafted(4);
  const ResidentData data = make_resident(d, Target::Cpu);
  CropFlip spec = spec_for(data);
  spec.padding = 100;  // every crop is all padding
  const std::vector<float> got = gather_on(Target::Cpu, data, {2, -1, 4}, spec);
  // The float path's black pixel, -mean / std, to the bit.
  expect_same_bits(std::vector<float>(got.begin(), got.begin() + data.features),
                   reference_crop_flip(d, 2, crop_flip_draw(spec, 2), spec.padding), "padding");
  for (std::int64_t i = 0; i < data.features; ++i) {
    EXPECT_EQ(got[i], testing::float_path_shift(d, static_cast<std::size_t>(i / kImage.pixels())));
    EXPECT_EQ(std::bit_cast<std::uint32_t>(got[data.features + i]), kPoisonWord);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(got[2 * data.features + i]), kPoisonWord);
  }
}

TEST(GatherCropFlip, DataSetsPadWithWhatABlackPixelNormalizesTo) {
  testing::TempDir dir;
  testing::write_tiny_cifar(dir / "cifar", 2, 2);
  const Dataset d = load_dataset(DatasetKind::Cifar10, dir / "cifar", Split::Test);
  EXPECT_EQ(d.image, (ImageShape{3, 32, 32}));
  const float means[3] = {0.4914f, 0.4822f, 0.4465f}, stds[3] = {0.2470f, 0.2435f, 0.2616f};
  const PixelNormalization norm = make_resident(d, Target::Cpu).normalization;
  ASSERT_EQ(norm.channels, 3);
  for (int c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(norm.shift[c], (0.0f - means[c]) / stds[c]);
  // write_tiny_cifar's first pixel of every plane is black, and normalizes to the padding.
  const std::vector<float> inputs = testing::float_path_images(d);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(inputs[c * 1024], norm.shift[c]);
  testing::write_tiny_mnist(dir / "mnist", 2, 2, false);
  const Dataset f = load_dataset(DatasetKind::FashionMnist, dir / "mnist", Split::Test);
  EXPECT_EQ(f.image, (ImageShape{1, 28, 28}));
  const PixelNormalization gray = make_resident(f, Target::Cpu).normalization;
  ASSERT_EQ(gray.channels, 1);
  EXPECT_FLOAT_EQ(gray.shift[0], -0.2860f / 0.3530f);
}

TEST(GatherCropFlip, DataWithoutAnImageShapeIsRefused) {
  Dataset d = crafted(4);
  d.image = ImageShape{};
  const ResidentData data = make_resident(d, Target::Cpu);
  testing::expect_input_error([&] { (void)crop_flip_spec(data, 2, 1, 0); }, {"no image shape"});
  testing::expect_input_error(
      [&] {
        SupervisedTask task(data, data, 1, 2, 2, 1, Augmentation{Augment::CropFlip, 2});
      },
      {"no image shape"});
}

// Every sample's training input in `epoch`, for the global batch split over `world` ranks.
std::map<std::int32_t, std::vector<float>> epoch_inputs(const ResidentData& data, Augmentation a,
                                                        std::int64_t batch, int world,
                                                        std::int64_t epoch) {
  constexpr std::uint64_t kSeed = 21;
  SupervisedTask task(data, data, 2, batch, batch, kSeed, a);
  task.begin_period(epoch, Target::Cpu);
  const std::vector<std::int32_t> order = epoch_order(kSeed, epoch, data.count);
  std::map<std::int32_t, std::vector<float>> inputs;
  for (std::int64_t s = 0; s < task.steps_per_period(); ++s) {
    for (int rank = 0; rank < world; ++rank) {
      const StepRows rows = task.load(s, rank, world, nullptr);
      const std::vector<float> x = task.input().to_vector();
      for (std::int64_t p = rows.mine.begin; p < rows.mine.end; ++p) {
        const auto first = x.begin() + (p - rows.mine.begin) * data.features;
        inputs[order[p]] = std::vector<float>(first, first + data.features);
      }
    }
  }
  EXPECT_EQ(static_cast<std::int64_t>(inputs.size()), data.count);
  return inputs;
}

TEST(ClassificationAugment, ASampleIsTheSameForAnyRankCountAndBatchPosition) {
  const ResidentData data = make_resident(crafted(23), Target::Cpu);
  const Augmentation crop_flip{Augment::CropFlip, kPadding};
  const auto one_rank = epoch_inputs(data, crop_flip, 10, 1, 1);
  EXPECT_EQ(epoch_inputs(data, crop_flip, 10, 3, 1), one_rank);
  EXPECT_EQ(epoch_inputs(data, crop_flip, 7, 4, 1), one_rank);  // other positions in the batch
  EXPECT_EQ(epoch_inputs(data, crop_flip, 23, 2, 1), one_rank);
  // And what the kernel draws for (seed, epoch 1, sample): the task keys the epoch.
  const CropFlip spec = crop_flip_spec(data, kPadding, 21, 1);
  for (const auto& [sample, x] : one_rank) {
    EXPECT_EQ(x, gather_on(Target::Cpu, data, {sample}, spec)) << "sample " << sample;
  }
  // Another epoch augments anew.
  const auto epoch_zero = epoch_inputs(data, crop_flip, 10, 1, 0);
  int changed = 0;
  for (const auto& [sample, x] : one_rank) changed += epoch_zero.at(sample) != x ? 1 : 0;
  EXPECT_GT(changed, 15);
}

TEST(ClassificationAugment, NoneIsThePlainSample) {
  const Dataset d = crafted(23);
  const ResidentData data = make_resident(d, Target::Cpu);
  const std::vector<float> inputs = testing::float_path_images(d);
  for (const auto& [sample, x] : epoch_inputs(data, Augmentation{}, 10, 3, 1)) {
    const auto first = inputs.begin() + sample * d.features;
    expect_same_bits(x, std::vector<float>(first, first + d.features),
                     detail::concat("sample ", sample));
  }
}

}  // namespace
}  // namespace noeira
