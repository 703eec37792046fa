#pragma once
// In-memory classification data sets: images as the files store them, one byte per pixel, with
// the statistics that normalize them; labels as int32. A batch is normalized as it is gathered
// (train/batch.hpp), so the data is held at its own size, not at four bytes per pixel.
// A user's own arrays (--data npy, --data h5: train/array_dataset.hpp) are float features instead,
// fed to the model as the files hold them.
//
// Normalization: pixel / 255, then (x - mean) / std with the data set's published training-split
// statistics (fixed constants, so train and eval agree without re-reading the training split):
//   Fashion-MNIST mean 0.2860 std 0.3530; MNIST mean 0.1307 std 0.3081;
//   CIFAR-10 per channel mean (0.4914, 0.4822, 0.4465) std (0.2470, 0.2435, 0.2616).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/names.hpp"
#include "core/tensor.hpp"
#include "io/array_source.hpp"
#include "kernels/kernel_table.hpp"
#include "nn/image_shape.hpp"

namespace noeira {

// What --data names: images, a user's arrays, or a language model's text (train/text_data.hpp)
// or token shards (io/token_shards.hpp).
enum class DatasetKind : std::uint8_t {
  FashionMnist,
  Mnist,
  Cifar10,
  Npy,
  H5,
  Arrays,
  Text,
  Tokens
};

inline constexpr NameTable<DatasetKind, 8> kDatasetNames{{{{DatasetKind::FashionMnist, "fashion-mnist"},
                                                          {DatasetKind::Mnist, "mnist"},
                                                          {DatasetKind::Cifar10, "cifar10"},
                                                          {DatasetKind::Npy, "npy"},
                                                          {DatasetKind::H5, "h5"},
                                                          {DatasetKind::Arrays, "arrays"},
                                                          {DatasetKind::Text, "text"},
                                                          {DatasetKind::Tokens, "tokens"}}},
                                                        "data set"};

std::string_view to_string(DatasetKind kind);
// "fashion-mnist", "mnist", "cifar10", "npy", "h5", "arrays", "text", "tokens"; anything else is an
// InputError listing the choices.
DatasetKind parse_dataset_kind(std::string_view name);
std::vector<std::string> dataset_names();
// Where Debian's packages (or the usual layout) put the files; empty for a user's arrays (npy,
// h5), whose directory only the user knows, and for text (train/run_data.hpp finds the corpus).
std::filesystem::path default_data_dir(DatasetKind kind);
// Whether the data set is a language model's: text, or token shards.
inline bool is_language_data(DatasetKind kind) {
  return kind == DatasetKind::Text || kind == DatasetKind::Tokens;
}
// Whether the data set's samples are images of bytes (pixel_stats, class_names, augmentation).
bool holds_pixels(DatasetKind kind);

// How a data set's pixels become a model's inputs: image shape, and per channel the mean and
// standard deviation of pixel / 255 (the header comment's constants). model.h5 records them, so
// a reader outside noeira feeds the model what it was trained on.
struct PixelStats {
  ImageShape image;
  std::span<const float> mean;  // [image.channels]
  std::span<const float> std;   // [image.channels]
};
// An InputError for a user's arrays, whose features are no pixels.
PixelStats pixel_stats(DatasetKind kind);

// The names of the classes, label order ("T-shirt/top", "Trouser", ... for Fashion-MNIST).
std::span<const std::string_view> class_names(DatasetKind kind);

struct Dataset {
  std::string name;                   // e.g. "fashion-mnist/train", for messages
  std::int64_t count = 0;             // samples
  std::int64_t features = 0;          // bytes (model inputs) per sample: 784 for 28x28, 3072 CIFAR
  int num_classes = 0;
  // The image a sample's features hold, [channels, height, width] (features = image.numel()). A
  // data set built without it (image.numel() != features) cannot be augmented.
  ImageShape image;
  // Per channel, the mean and standard deviation of pixel / 255 (as PixelStats): a sample is
  // mean.size() planes of features / mean.size() bytes, channel c normalized with mean[c], std[c].
  std::vector<float> mean, std;
  std::vector<std::uint8_t> pixels;   // [count, features], as the files store them
  // [count, features] F32 on the CPU: float features, fed to the model as they are. A data set
  // holds these (pixels empty, no statistics) or pixels, never both. A tensor, not a vector: on
  // the CPU the resident data shares it, so a split is never held twice. I32 for the ids of a
  // model whose first module is an embedding (ids()).
  Tensor values;
  // Or float features read from their file batch by batch, never held (data larger than memory:
  // --stream-data): values stays undefined, and the source is shared by every rank's gathers.
  // streamed_hash is the hash of every row, for the ranks to compare.
  std::shared_ptr<const io::ArraySource> streamed;
  std::uint64_t streamed_hash = 0;
  std::vector<std::int32_t> labels;   // [count], in 0..num_classes-1
  // Regression: [count, target_width] float targets, which the model's outputs predict, instead of
  // labels (labels empty, num_classes 0). target_width 0: classification.
  std::vector<float> targets;
  std::int64_t target_width = 0;

  // Features of the user's arrays (floats or ids), held or streamed, rather than pixels.
  bool float_features() const { return values.defined() || streamed != nullptr; }
  bool ids() const { return values.defined() && values.dtype() == DType::I32; }
};

// What gather_pixels needs to normalize `data`'s bytes (kernel_table.hpp): scale and shift per
// channel, in the float arithmetic the inputs have always been computed with. InputError when the
// statistics do not fit the features or have more channels than the kernels take.
PixelNormalization pixel_normalization(const Dataset& data);

enum class Split : std::uint8_t { Train, Test };

// The samples a split keeps: `count`, or `limit` when 0 < limit <= count; a negative limit or one
// past `count` is an InputError naming the split.
std::int64_t apply_limit(const std::string& name, std::int64_t count, std::int64_t limit);

// Loads one split from `dir`. limit > 0 keeps only the first `limit` samples (for quick runs and
// tests); a limit above the split's size is an InputError. For a user's arrays, num_classes is one
// past the split's largest label (the model's outputs decide how many there are:
// train/run_data.cpp).
// `stream`: a user's float features are read batch by batch rather than held
// (Dataset::streamed; they are anyway where holding them would take more than a quarter of the
// memory available).
// id_vocab > 0: a user's arrays hold the ids of a model's embedding (train/array_dataset.hpp).
Dataset load_dataset(DatasetKind kind, const std::filesystem::path& dir, Split split,
                     std::int64_t limit = 0, bool stream = false, std::int64_t id_vocab = 0);

}  // namespace noeira
