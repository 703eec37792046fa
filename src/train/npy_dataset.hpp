#pragma once
// A user's own arrays as a classification data set (--data npy): a directory holding
//   train_x.npy  features, [samples, ...] of any numeric type, read as float32 and fed to the
//                model as they are (the program that wrote them normalizes);
//   train_y.npy  class labels, [samples] or [samples, 1] of an integer type, from 0; or, of a
//                float type, regression targets [samples] or [samples, targets] (the model
//                predicts them; the loss is the mean squared error);
//   test_x.npy, test_y.npy  the same for the split evaluated after each epoch.
// A sample's features are the elements of its row in C order (an image [samples, 1, 28, 28] gives
// 784). Refused in one line naming the file (and the sample, where one is at fault): a missing
// file, an array io/npy.hpp does not take, features and labels of different lengths, no samples or
// rows of no features, a feature or target that is NaN or infinite, a multi-column label array, a
// negative label or one past int32.
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "train/dataset.hpp"

namespace noeira {

// `split` is "train" or "test": the files <split>_x.npy and <split>_y.npy of `dir`. limit as
// load_dataset's.
Dataset load_npy_split(const std::filesystem::path& dir, std::string_view split,
                       std::int64_t limit);

}  // namespace noeira
