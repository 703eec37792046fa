#include "train/feature_normalization.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "kernels/error.hpp"
#include "train/dataset.hpp"

namespace noeira {

void FeatureNormalization::apply(std::span<float> rows, std::int64_t width) const {
  if (identity()) return;
  const auto w = static_cast<std::size_t>(width);
  const bool each = mean.size() > 1;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::size_t f = each ? i % w : 0;
    rows[i] = (rows[i] - mean[f]) / std[f];
  }
}

namespace {

// Rows of `data`'s features in pieces of about 1 MiB, held or streamed (as the source gives them),
// for visit(first_row, values).
template <class Visit>
void for_each_feature_piece(const Dataset& data, Visit&& visit) {
  const std::int64_t width = data.features;
  const std::int64_t piece_rows = std::max<std::int64_t>(1, (std::int64_t{1} << 18) / width);
  std::vector<float> buffer;
  for (std::int64_t row = 0; row < data.count; row += piece_rows) {
    const std::int64_t count = std::min(piece_rows, data.count - row);
    const auto n = static_cast<std::size_t>(count * width);
    if (data.streamed) {
      buffer.resize(n);
      data.streamed->read_rows(row, count, buffer);
      visit(row, std::span<const float>(buffer));
    } else {
      visit(row, std::span<const float>(data.values.data() + row * width, n));
    }
  }
}

// A streamed split's features normalized as each batch reads them.
class NormalizedSource final : public io::ArraySource {
 public:
  NormalizedSource(std::shared_ptr<const io::ArraySource> source, FeatureNormalization n)
      : io::ArraySource(source->name(), source->shape()),
        source_(std::move(source)),
        n_(std::move(n)) {}

  bool holds_floats() const override { return source_->holds_floats(); }
  void read_rows(std::int64_t begin, std::int64_t count, std::span<float> out) const override {
    source_->read_rows(begin, count, out);
    n_.apply(out, row_elements());
  }
  void read_rows(std::int64_t begin, std::int64_t count,
                 std::span<std::int64_t> out) const override {
    source_->read_rows(begin, count, out);
  }

 private:
  std::shared_ptr<const io::ArraySource> source_;
  FeatureNormalization n_;
};

}  // namespace

FeatureNormalization feature_normalization(const Dataset& train, bool standardize, double scale,
                                           double shift) {
  FeatureNormalization n;
  if (standardize) {
    // Standardizing undoes any scale and shift: (x·a + b - mean) / std is (x - mean_x) / std_x
    // (config.cpp refuses the two together).
    const auto width = static_cast<std::size_t>(train.features);
    // Sums about the first row (shifted data): no cancellation where a feature sits far from 0,
    // and a feature that never varies has a variance of exactly 0.
    std::vector<double> origin(width), sum(width), squares(width);
    bool first = true;
    for_each_feature_piece(train, [&](std::int64_t, std::span<const float> rows) {
      if (first) std::copy_n(rows.begin(), width, origin.begin());
      first = false;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const double d = static_cast<double>(rows[i]) - origin[i % width];
        sum[i % width] += d;
        squares[i % width] += d * d;
      }
    });
    n.mean.resize(width);
    n.std.resize(width);
    const auto count = static_cast<double>(train.count);
    for (std::size_t f = 0; f < width; ++f) {
      const double offset = sum[f] / count;
      const double variance = std::max(0.0, squares[f] / count - offset * offset);
      n.mean[f] = static_cast<float>(origin[f] + offset);
      const auto spread = static_cast<float>(std::sqrt(variance));
      n.std[f] = spread > 0.0f ? spread : 1.0f;
    }
  } else if (scale != 1.0 || shift != 0.0) {
    // x·scale + shift = (x - (-shift / scale)) / (1 / scale)
    n.mean = {static_cast<float>(-shift / scale)};
    n.std = {static_cast<float>(1.0 / scale)};
  }
  return n;
}

void normalize_features(Dataset& data, const FeatureNormalization& n) {
  if (n.identity()) return;
  if (data.streamed) {
    data.streamed = std::make_shared<NormalizedSource>(std::move(data.streamed), n);
  } else {
    n.apply(std::span(data.values.data(), static_cast<std::size_t>(data.values.numel())),
            data.features);
  }
  // Finite features can leave the normalization infinite (a scale of 1e30): said now, naming the
  // value, not as a NaN loss steps later. A streamed split takes one more pass for it.
  for_each_feature_piece(data, [&](std::int64_t first_row, std::span<const float> rows) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (std::isfinite(rows[i])) continue;
      const auto w = static_cast<std::size_t>(data.features);
      const std::size_t f = i % w;
      const std::size_t at = n.mean.size() > 1 ? f : 0;
      throw InputError(detail::concat(
          data.name, ": sample ", first_row + static_cast<std::int64_t>(i / w), ", feature ", f,
          " becomes ", rows[i], " once normalized ((x - ", n.mean[at], ") / ", n.std[at],
          "); the model's inputs must be finite (a smaller --feature-scale?)"));
    }
  });
}

std::string float_list_text(std::span<const float> values) {
  std::string out = "[";
  char buffer[32];
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, values[i]);
    out.append(buffer, end);
  }
  return out + "]";
}

std::optional<std::vector<float>> parse_float_list(std::string_view text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return std::nullopt;
  text = text.substr(1, text.size() - 2);
  std::vector<float> out;
  while (!text.empty()) {
    float v = 0.0f;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || !std::isfinite(v)) return std::nullopt;
    out.push_back(v);
    text.remove_prefix(static_cast<std::size_t>(end - text.data()));
    if (text.empty()) break;
    if (text.front() != ',' || text.size() == 1) return std::nullopt;
    text.remove_prefix(1);
  }
  return out;
}

FeatureNormalization parse_feature_normalization(std::string_view mean, std::string_view std,
                                                 std::int64_t inputs, std::string_view where) {
  FeatureNormalization n;
  if (mean.empty() && std.empty()) return n;
  const auto refuse = [&](std::string_view attribute, std::string_view problem) {
    throw InputError(detail::concat(where, ": the input normalization: '", attribute, "' ",
                                    problem));
  };
  const auto list = [&](std::string_view text, std::string_view attribute, std::string_view other) {
    if (text.empty()) refuse(attribute, detail::concat("is missing beside '", other, "'"));
    auto values = parse_float_list(text);
    if (!values || values->empty()) {
      refuse(attribute, "is not a list of finite numbers ([1.5,-2,...])");
    }
    if (values->size() != 1 && static_cast<std::int64_t>(values->size()) != inputs) {
      refuse(attribute, detail::concat("has ", values->size(), " values for a model of ", inputs,
                                       " inputs (1 or ", inputs, ")"));
    }
    return std::move(*values);
  };
  n.mean = list(mean, "input_mean", "input_std");
  n.std = list(std, "input_std", "input_mean");
  if (n.mean.size() != n.std.size()) {
    refuse("input_std", detail::concat("has ", n.std.size(), " values, 'input_mean' ",
                                       n.mean.size()));
  }
  for (std::size_t f = 0; f < n.std.size(); ++f) {
    if (n.std[f] == 0.0f) refuse("input_std", detail::concat("is 0 at feature ", f));
  }
  return n;
}

}  // namespace noeira
