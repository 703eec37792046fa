#include "train/npy_dataset.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "io/npy.hpp"
#include "kernels/error.hpp"

namespace noeira {

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) out += detail::concat(i > 0 ? ", " : "", shape[i]);
  return out + ")";
}

io::NpyArray open_split_file(const std::filesystem::path& dir, std::string_view split,
                             std::string_view part) {
  const std::filesystem::path file = dir / detail::concat(split, "_", part, ".npy");
  if (!std::filesystem::is_regular_file(file)) {
    throw InputError(detail::concat(file.string(), ": no such file (--data npy reads ", split,
                                    "_x.npy and ", split, "_y.npy from --data-dir)"));
  }
  return io::NpyArray::open(file);
}

bool holds_floats(const io::NpyArray& a) {
  const io::NpyType t = a.header().type;
  return t == io::NpyType::F32 || t == io::NpyType::F64 || t == io::NpyType::F16;
}

// The first `count` rows of `a` as floats, every one finite; `what` names a row's elements in
// messages ("feature", "target").
std::vector<float> read_finite(const io::NpyArray& a, std::int64_t count, std::string_view what) {
  const std::int64_t width = a.header().row_elements();
  std::vector<float> values(static_cast<std::size_t>(count * width));
  a.read_rows(0, count, values);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      const auto w = static_cast<std::size_t>(width);
      throw InputError(detail::concat(a.path().string(), ": sample ", i / w, " holds ", values[i],
                                      " at ", what, " ", i % w, " (", what, "s must be finite)"));
    }
  }
  return values;
}

// The first `count` labels of `y`, each in [0, int32's largest) (one past it counts the classes).
std::vector<std::int32_t> read_labels(const io::NpyArray& y, std::int64_t count) {
  std::vector<std::int64_t> wide(static_cast<std::size_t>(count));
  y.read_rows(0, count, wide);
  std::vector<std::int32_t> labels(wide.size());
  for (std::size_t i = 0; i < wide.size(); ++i) {
    if (wide[i] < 0 || wide[i] >= std::numeric_limits<std::int32_t>::max()) {
      throw InputError(detail::concat(y.path().string(), ": sample ", i, " has label ", wide[i],
                                      " (labels are classes 0, 1, 2, ...)"));
    }
    labels[i] = static_cast<std::int32_t>(wide[i]);
  }
  return labels;
}

}  // namespace

Dataset load_npy_split(const std::filesystem::path& dir, std::string_view split,
                       std::int64_t limit) {
  const io::NpyArray x = open_split_file(dir, split, "x");
  const io::NpyArray y = open_split_file(dir, split, "y");
  const io::NpyHeader& xh = x.header();
  const io::NpyHeader& yh = y.header();
  if (xh.shape.empty() || xh.rows() == 0 || xh.row_elements() == 0) {
    throw InputError(detail::concat(x.path().string(), ": shape ", shape_text(xh.shape),
                                    " holds no samples of features (expected [samples, ...])"));
  }
  const bool regression = holds_floats(y);
  if (yh.shape.empty() || (!regression && (yh.shape.size() > 2 || yh.row_elements() != 1)) ||
      (regression && yh.row_elements() == 0)) {
    throw InputError(detail::concat(
        y.path().string(), ": shape ", shape_text(yh.shape),
        regression ? " holds no targets per sample (expected [samples] or [samples, targets])"
                   : " is not one label per sample ([samples] or [samples, 1])"));
  }
  if (yh.rows() != xh.rows()) {
    throw InputError(detail::concat(y.path().string(), ": ", yh.rows(), " labels for the ",
                                    xh.rows(), " samples of ", x.path().string()));
  }
  Dataset d;
  d.name = detail::concat("npy/", split);
  d.count = apply_limit(d.name, xh.rows(), limit);
  d.features = xh.row_elements();
  d.float_features = true;
  d.values = read_finite(x, d.count, "feature");
  if (regression) {
    d.target_width = yh.row_elements();
    d.targets = read_finite(y, d.count, "target");
    return d;
  }
  d.labels = read_labels(y, d.count);
  std::int32_t largest = 0;
  for (const std::int32_t label : d.labels) largest = std::max(largest, label);
  d.num_classes = largest + 1;
  return d;
}

}  // namespace noeira
