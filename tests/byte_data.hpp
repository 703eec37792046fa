#pragma once
// Data sets of bytes for the tests, as the real ones are held (train/dataset.hpp): values on a
// known range quantized to a byte, with the statistics that normalize the byte back to about the
// value; and the float path the data sets took before they were held as bytes, as the reference
// that gather_pixels must match bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "train/dataset.hpp"

namespace noeira::testing {

// Bytes 0 and 255 normalize to lo and hi (one channel): mean and std of pixel / 255 such that
// (0 - mean) / std = lo and (1 - mean) / std = hi.
inline void set_value_range(Dataset& d, float lo, float hi) {
  d.std = {1.0f / (hi - lo)};
  d.mean = {-lo / (hi - lo)};
}

// The byte that normalizes nearest to v under set_value_range(lo, hi), v clamped to the range.
inline std::uint8_t byte_of(float v, float lo, float hi) {
  const float unit = std::clamp((v - lo) / (hi - lo), 0.0f, 1.0f);
  return static_cast<std::uint8_t>(std::lround(unit * 255.0f));
}

// The scale and shift of channel c as the data set loader computed them, and every pixel of `d`
// normalized as it did, [count, features]: byte · scale + shift per channel plane.
inline float float_path_scale(const Dataset& d, std::size_t c) {
  return 1.0f / (255.0f * d.std[c]);
}
inline float float_path_shift(const Dataset& d, std::size_t c) { return -d.mean[c] / d.std[c]; }
inline std::vector<float> float_path_images(const Dataset& d) {
  const std::size_t channels = d.mean.size();
  const std::size_t plane = static_cast<std::size_t>(d.features) / channels;
  std::vector<float> out(d.pixels.size());
  std::size_t i = 0;
  for (std::int64_t n = 0; n < d.count; ++n) {
    for (std::size_t c = 0; c < channels; ++c) {
      const float scale = float_path_scale(d, c), shift = float_path_shift(d, c);
      for (std::size_t p = 0; p < plane; ++p, ++i) {
        out[i] = static_cast<float>(d.pixels[i]) * scale + shift;
      }
    }
  }
  return out;
}

}  // namespace noeira::testing
