#pragma once
// A trainable parameter, as a module sees it: a handle on its value and gradient.
//
// Who owns the memory (docs/design.md, "Parameter memory: one owner"): a module constructs its Params with storage
// of their own, into which the initializer writes; training hands the walk to a parameter store
// (distributed/param_store.hpp), which copies the values into its flat buffers and from then on
// owns every byte of parameter memory — values, gradients and the optimizer state (which exists
// only there). val and grd become views into the store; where the store does not hold a
// parameter at the moment (ZeRO-3 outside its unit, a ZeRO-2/3 gradient outside its unit's vjp)
// they are absent tensors whose access is an error naming the parameter.
#include <cstdint>
#include <string>

#include "core/tensor.hpp"

namespace noeira {

// Whether weight decay applies to a parameter (not to biases and normalization scales).
enum class Decay : std::uint8_t { Apply, Skip };

struct Param {
  Tensor val;  // the parameter
  Tensor grd;  // d loss / d val, same shape
  Decay decay = Decay::Apply;

  Param() = default;
  Param(Shape shape, Target target, Decay decay_mode)
      : val(shape, target), grd(shape, target), decay(decay_mode) {}

  std::int64_t numel() const { return val.numel(); }
  const Shape& shape() const { return val.shape(); }
  Target target() const { return val.target(); }
};

// A parameter, or a buffer (state that is not a parameter: core/module.hpp), with its dotted name
// in the walk ("0.weight", "1.running_mean"): what the walk yields to its readers, be they the
// sharding policy, a checkpoint or model.h5.
struct NamedParam {
  std::string name;
  Param* param = nullptr;
};
struct NamedBuffer {
  std::string name;
  Tensor* tensor = nullptr;
};

}  // namespace noeira
