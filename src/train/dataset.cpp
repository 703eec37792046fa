#include "train/dataset.hpp"

#include <utility>

#include "io/cifar.hpp"
#include "io/idx.hpp"
#include "kernels/error.hpp"
#include "train/array_dataset.hpp"

namespace noeira {

namespace {

constexpr float kFashionMean[] = {0.2860f}, kFashionStd[] = {0.3530f};
constexpr float kMnistMean[] = {0.1307f}, kMnistStd[] = {0.3081f};
constexpr float kCifarMean[] = {0.4914f, 0.4822f, 0.4465f};
constexpr float kCifarStd[] = {0.2470f, 0.2435f, 0.2616f};
constexpr ImageShape kGrayImage{1, 28, 28};
constexpr ImageShape kCifarImage{3, 32, 32};
static_assert(kCifarImage.numel() == io::kCifarImageBytes);

constexpr std::string_view kFashionClasses[] = {"T-shirt/top", "Trouser", "Pullover", "Dress",
                                                "Coat",        "Sandal",  "Shirt",    "Sneaker",
                                                "Bag",         "Ankle boot"};
constexpr std::string_view kDigitClasses[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
constexpr std::string_view kCifarClasses[] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                              "dog",      "frog",       "horse", "ship", "truck"};
static_assert(std::size(kCifarClasses) == io::kCifar10Classes);

// Records the image shape and statistics of `s` in `d`, whose pixels are `pixels`: its first
// d.count samples, the rest freed (a --limit run keeps only what it reads).
void set_pixels(Dataset& d, std::vector<std::uint8_t>&& pixels, const PixelStats& s) {
  d.image = s.image;
  d.features = s.image.numel();
  d.mean.assign(s.mean.begin(), s.mean.end());
  d.std.assign(s.std.begin(), s.std.end());
  d.pixels = std::move(pixels);
  const auto bytes = static_cast<std::size_t>(d.count * d.features);
  // Also the slack of the appends that read CIFAR's five files into one split.
  if (d.pixels.size() != bytes || d.pixels.capacity() != bytes) {
    d.pixels.resize(bytes);
    d.pixels.shrink_to_fit();
  }
}

}  // namespace

std::int64_t apply_limit(const std::string& name, std::int64_t count, std::int64_t limit) {
  if (limit < 0) throw InputError(detail::concat(name, ": negative sample limit ", limit));
  if (limit == 0) return count;
  if (limit > count) {
    throw InputError(detail::concat(name, ": limit ", limit, " exceeds the ", count,
                                    " samples in the split"));
  }
  return limit;
}

namespace {

Dataset load_idx(DatasetKind kind, const std::filesystem::path& dir, Split split,
                 std::int64_t limit) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::filesystem::path images_file = io::find_idx_file(dir, prefix + "-images-idx3-ubyte");
  const std::filesystem::path labels_file = io::find_idx_file(dir, prefix + "-labels-idx1-ubyte");
  io::IdxImages images = io::read_idx_images(images_file);
  std::vector<std::uint8_t> labels = io::read_idx_labels(labels_file, 10);
  if (images.rows != 28 || images.cols != 28) {
    throw InputError(detail::concat(images_file.string(), ": images are ", images.rows, "x",
                                    images.cols, ", expected 28x28"));
  }
  if (static_cast<std::int64_t>(labels.size()) != images.count) {
    throw InputError(detail::concat(labels_file.string(), ": ", labels.size(),
                                    " labels for the ", images.count, " images of ",
                                    images_file.string()));
  }
  Dataset d;
  d.name = detail::concat(to_string(kind), split == Split::Train ? "/train" : "/test");
  d.count = apply_limit(d.name, images.count, limit);
  d.num_classes = 10;
  set_pixels(d, std::move(images.pixels), pixel_stats(kind));
  d.labels.assign(labels.begin(), labels.begin() + d.count);
  return d;
}

Dataset load_cifar(const std::filesystem::path& dir, Split split, std::int64_t limit) {
  io::CifarBatch batch;
  if (split == Split::Train) {
    for (int i = 1; i <= 5; ++i) {
      io::read_cifar_batch(dir / detail::concat("data_batch_", i, ".bin"), batch);
    }
  } else {
    io::read_cifar_batch(dir / "test_batch.bin", batch);
  }
  Dataset d;
  d.name = split == Split::Train ? "cifar10/train" : "cifar10/test";
  d.count = apply_limit(d.name, batch.count, limit);
  d.num_classes = io::kCifar10Classes;
  set_pixels(d, std::move(batch.pixels), pixel_stats(DatasetKind::Cifar10));
  d.labels.assign(batch.labels.begin(), batch.labels.begin() + d.count);
  return d;
}

}  // namespace

std::string_view to_string(DatasetKind kind) { return kDatasetNames.name_of(kind); }

std::vector<std::string> dataset_names() { return kDatasetNames.names(); }

DatasetKind parse_dataset_kind(std::string_view name) { return kDatasetNames.parse(name); }

PixelStats pixel_stats(DatasetKind kind) {
  switch (kind) {
    case DatasetKind::FashionMnist: return {kGrayImage, kFashionMean, kFashionStd};
    case DatasetKind::Mnist: return {kGrayImage, kMnistMean, kMnistStd};
    case DatasetKind::Cifar10: return {kCifarImage, kCifarMean, kCifarStd};
    case DatasetKind::Npy:
    case DatasetKind::H5:
    case DatasetKind::Arrays:
    case DatasetKind::Text:
    case DatasetKind::Tokens: break;
  }
  throw InputError(detail::concat("data set '", to_string(kind),
                                  "' has no pixel statistics: its features are not pixels"));
}

std::span<const std::string_view> class_names(DatasetKind kind) {
  switch (kind) {
    case DatasetKind::FashionMnist: return kFashionClasses;
    case DatasetKind::Mnist: return kDigitClasses;
    case DatasetKind::Cifar10: return kCifarClasses;
    case DatasetKind::Npy:
    case DatasetKind::H5:
    case DatasetKind::Arrays:
    case DatasetKind::Text:
    case DatasetKind::Tokens: break;
  }
  throw InputError(detail::concat("data set '", to_string(kind), "' names no classes"));
}

std::filesystem::path default_data_dir(DatasetKind kind) {
  switch (kind) {
    case DatasetKind::FashionMnist: return "/usr/share/datasets/fashion-mnist";
    case DatasetKind::Mnist: return "/usr/share/datasets/mnist";
    case DatasetKind::Cifar10: return "/usr/share/datasets/cifar-10-batches-bin";
    case DatasetKind::Npy:
    case DatasetKind::H5:
    case DatasetKind::Arrays:
    case DatasetKind::Text:
    case DatasetKind::Tokens: break;
  }
  return {};
}

bool holds_pixels(DatasetKind kind) {
  return kind == DatasetKind::FashionMnist || kind == DatasetKind::Mnist ||
         kind == DatasetKind::Cifar10;
}

PixelNormalization pixel_normalization(const Dataset& data) {
  const auto channels = static_cast<std::int64_t>(data.mean.size());
  if (channels == 0 || data.std.size() != data.mean.size() || data.features % channels != 0) {
    throw InputError(detail::concat(data.name, ": ", data.mean.size(), " means and ",
                                    data.std.size(), " standard deviations for samples of ",
                                    data.features, " features"));
  }
  if (channels > kMaxPixelChannels) {
    throw InputError(detail::concat(data.name, ": ", channels, " channels, more than the ",
                                    kMaxPixelChannels, " the batch gather normalizes"));
  }
  PixelNormalization norm;
  norm.channels = channels;
  for (std::int64_t c = 0; c < channels; ++c) {
    // shift is also crop-flip's padding: torchvision's zero padding, normalized.
    norm.scale[c] = 1.0f / (255.0f * data.std[c]);
    norm.shift[c] = -data.mean[c] / data.std[c];
  }
  return norm;
}

Dataset load_dataset(DatasetKind kind, const std::filesystem::path& dir, Split split,
                     std::int64_t limit, bool stream, std::int64_t id_vocab) {
  // A missing directory shows up as its first missing file, which is the more useful message.
  const std::string_view split_name = split == Split::Train ? "train" : "test";
  switch (kind) {
    case DatasetKind::Cifar10: return load_cifar(dir, split, limit);
    case DatasetKind::Npy: return load_npy_split(dir, split_name, limit, stream, id_vocab);
    case DatasetKind::H5: return load_h5_split(dir, split_name, limit, stream, id_vocab);
    case DatasetKind::Arrays:
      throw InputError("--data arrays names its arrays one by one: load_named_split reads them");
    case DatasetKind::Text:
    case DatasetKind::Tokens:
      throw InputError(detail::concat("--data ", to_string(kind), " is a corpus, not a split of "
                                      "samples: load_text_run reads it"));
    case DatasetKind::FashionMnist:
    case DatasetKind::Mnist: break;
  }
  return load_idx(kind, dir, split, limit);
}

}  // namespace noeira
