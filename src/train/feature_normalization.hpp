#pragma once
// How a user's array features become a model's inputs (--data npy, h5, arrays): as the files hold
// them, or per feature
//   value = (x - mean[f]) / std[f]
// where mean and std fold a scale and shift the user gives (--feature-scale, --feature-shift: a
// uint8 image's 1/255) and, with --normalize standardize, each feature's mean and standard
// deviation over the training split (population statistics, as scikit-learn's StandardScaler:
// a feature that never varies keeps a spread of 1, so that it becomes 0 rather than NaN). A list
// of one applies to every feature.
//
// Computed once from the training split when a run starts (a resume computes the same), applied
// to both splits, and recorded as the attributes input_mean and input_std of model.h5 and the
// labels of checkpoints, so that `noeira eval` and a reader outside noeira feed the model what it
// was trained on. The lists are written with the shortest decimal that reads back as the same
// float, and read back with a float parse: eval applies the very numbers training applied.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/array_source.hpp"

namespace noeira {

struct Dataset;

struct FeatureNormalization {
  std::vector<float> mean, std;  // both empty (the features as they are), or of one size

  bool identity() const { return mean.empty(); }
  // value = (x - mean[f]) / std[f] for each row of `width` features, in place.
  void apply(std::span<float> rows, std::int64_t width) const;
};

// What the user asked for (--normalize, --feature-scale, --feature-shift) over the training split
// `train`; identity when nothing was asked. Reads a streamed split's file once more.
FeatureNormalization feature_normalization(const Dataset& train, bool standardize, double scale,
                                           double shift);

// Applies `n` to `data`'s features: held ones in place, a streamed source wrapped so that each
// batch's rows are normalized as they are read. A value the normalization makes infinite is an
// InputError naming the sample and the feature.
void normalize_features(Dataset& data, const FeatureNormalization& n);

// "[0.5,-1.25]": each float as the shortest decimal that reads back as itself.
std::string float_list_text(std::span<const float> values);
// The floats of such a list, each finite; nullopt when `text` is not one.
std::optional<std::vector<float>> parse_float_list(std::string_view text);

// A recorded normalization (the texts of input_mean and input_std) for a model of `inputs`
// features: InputError naming `where` when the lists are not two lists of equal length, 1 or
// `inputs`, of finite floats with every std positive. Both texts empty: identity.
FeatureNormalization parse_feature_normalization(std::string_view mean, std::string_view std,
                                                 std::int64_t inputs, std::string_view where);

}  // namespace noeira
