#pragma once
// A trainable parameter: its value and gradient (always allocated) and Adam's moments (allocated
// by the first step of a stateful optimizer, so SGD never pays for them).
#include <cstdint>

#include "core/tensor.hpp"

namespace noeira {

// Whether weight decay applies to a parameter (not to biases and normalization scales).
enum class Decay : std::uint8_t { Apply, Skip };

struct Param {
  Tensor val;  // the parameter
  Tensor grd;  // d loss / d val, same shape
  Tensor m;    // first moment, undefined until ensure_moments()
  Tensor v;    // second moment, undefined until ensure_moments()
  Decay decay = Decay::Apply;

  Param() = default;
  Param(Shape shape, Target target, Decay decay_mode)
      : val(shape, target), grd(shape, target), decay(decay_mode) {}

  std::int64_t numel() const { return val.numel(); }
  const Shape& shape() const { return val.shape(); }
  Target target() const { return val.target(); }
  bool has_moments() const { return m.defined() && v.defined(); }
  void ensure_moments() {
    if (!m.defined()) m = Tensor(val.shape(), val.target());
    if (!v.defined()) v = Tensor(val.shape(), val.target());
  }
};

}  // namespace noeira
