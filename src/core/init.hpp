#pragma once
// Initializers. Parameters are initialized when a module is constructed; a value depends only on
// the seed, the parameter's dotted name and the element index (a counter-based generator), never
// on thread count, rank count or construction order.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/param.hpp"

namespace noeira {

enum class InitKind : std::uint8_t {
  KaimingNormal,   // N(0, 2/fan_in): for layers followed by ReLU
  KaimingUniform,  // U(±sqrt(6/fan_in))
  XavierNormal,    // N(0, 2/(fan_in+fan_out))
  XavierUniform,   // U(±sqrt(6/(fan_in+fan_out)))
  Normal,          // N(mean, std)
  Zero,
  // A formula instead of random draws, for tests that rebuild a model elsewhere (numpy, PyTorch)
  // without copying its weights: element i of a weight is sqrt(3 / fan_in) · sin(i + 1), of an
  // embedding-style normal(mean, std) parameter mean + std · sqrt(2) · sin(i + 1), of a
  // uniform(±bound) one bound · sin(i + 1) (the spreads of the random initializers they stand
  // for); i counts in row-major order, seed and name play no part.
  Deterministic,
};

struct InitSpec {
  InitKind kind = InitKind::KaimingNormal;
  float mean = 0.0f;  // for Normal
  float std = 0.02f;  // for Normal
  std::uint64_t seed = 0;
};

// What a module is constructed with: the target, the initializer and its own dotted path in the
// network (so each parameter draws from its own stream).
class Init {
 public:
  Init(Target target, InitSpec spec) : target_(target), spec_(spec) {}

  Target target() const { return target_; }
  const InitSpec& spec() const { return spec_; }
  const std::string& path() const { return path_; }

  // The Init of child `index` of a combinator: path "<path>.<index>".
  Init child(std::size_t index) const;
  // The Init of a named part of a leaf (attention's "qkv" and "proj"): path "<path>.<name>".
  Init named_child(std::string_view name) const;

  // A weight drawn from the spec, with decay.
  Param weight(std::string_view name, Shape shape, std::int64_t fan_in, std::int64_t fan_out) const;
  // A parameter filled with one value (biases 0, norm scales 1), without decay.
  Param constant(std::string_view name, Shape shape, float value) const;
  // A parameter drawn from N(mean, std) whatever the spec (embeddings), with decay.
  Param normal(std::string_view name, Shape shape, float mean, float std) const;
  // A parameter drawn from U(±bound) whatever the spec (PyTorch's recurrent layers draw every
  // weight and bias so); Deterministic gives bound · sin(i + 1).
  Param uniform(std::string_view name, Shape shape, float bound, Decay decay) const;

 private:
  std::uint64_t stream_of(std::string_view name) const;

  Target target_;
  InitSpec spec_;
  std::string path_;
};

// Joins a walk prefix and a name with a dot ("" + "weight" = "weight").
std::string join_name(std::string_view prefix, std::string_view name);

}  // namespace noeira
