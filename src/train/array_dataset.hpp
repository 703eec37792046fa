#pragma once
// A user's own arrays as a data set: --data npy, a directory of NumPy files
//   train_x.npy, train_y.npy, test_x.npy, test_y.npy
// or --data h5, a directory of two HDF5 files whose datasets /x and /y hold the same arrays
//   train.h5, test.h5
// x is the features (or, for a model whose first module is an embedding, its integer ids), [samples, ...] of any numeric type, read as float32 and fed to the model as
// they are (the program that wrote them normalizes); a sample's features are the elements of its
// row in C order (an image [samples, 1, 28, 28] gives 784). y is either class labels,
// [samples] or [samples, 1] of an integer type, from 0; or, of a float type, regression targets
// [samples] or [samples, targets] (the model predicts them; the loss is the mean squared error).
// Refused in one line naming the file (the dataset) and the sample where one is at fault: a
// missing file, an array io/npy.hpp or io/array_source.hpp does not take, features and targets of
// different lengths, no samples or rows of no features, a feature or target that is NaN or
// infinite, a multi-column label array, a negative label or one past int32.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>

#include "io/array_source.hpp"
#include "train/dataset.hpp"

namespace noeira {

// The split named `name` ("npy/train") of features x and targets y; limit and stream as
// load_dataset's (a streamed split keeps x). id_vocab > 0: the model takes ids (core/module.hpp
// input_vocab_of), and x must hold integers in [0, id_vocab), read as int32 ids (Dataset::values
// of DType::I32, held: --stream-data is refused).
Dataset load_array_split(std::shared_ptr<const io::ArraySource> x, const io::ArraySource& y,
                         std::string name, std::int64_t limit, bool stream = false,
                         std::int64_t id_vocab = 0);

// `split` is "train" or "test": <split>_x.npy and <split>_y.npy in `dir`.
Dataset load_npy_split(const std::filesystem::path& dir, std::string_view split,
                       std::int64_t limit, bool stream = false, std::int64_t id_vocab = 0);
// `split` is "train" or "test": the arrays --data arrays names one by one, x_spec and y_spec
// (--train-x and --train-y, or --test-x and --test-y; io/array_spec.hpp). An empty name is an
// InputError naming its flag.
Dataset load_named_split(std::string_view x_spec, std::string_view y_spec, std::string_view split,
                         std::int64_t limit, bool stream = false, std::int64_t id_vocab = 0);
// `split` is "train" or "test": datasets /x and /y of <split>.h5 in `dir`.
Dataset load_h5_split(const std::filesystem::path& dir, std::string_view split,
                      std::int64_t limit, bool stream = false, std::int64_t id_vocab = 0);

}  // namespace noeira
