#include "core/init.hpp"

#include <cmath>
#include <numbers>
#include <vector>

#include "core/hash.hpp"
#include "kernels/philox.hpp"

namespace noeira {

namespace {

// Element i of a normal(mean, std) sequence: Box-Muller on the first two words of block i.
float normal_at(std::uint64_t key, std::uint64_t stream, std::uint64_t i, float mean, float std) {
  const philox::Block b = philox::at(key, stream, i);
  const float u1 = philox::to_unit_open(b.v[0]);
  const float u2 = philox::to_unit_open(b.v[1]);
  const float z = std::sqrt(-2.0f * std::log(u1)) *
                  std::cos(2.0f * std::numbers::pi_v<float> * u2);
  return mean + std * z;
}

// sin(i + 1), the Deterministic initializer's sequence, computed in double so that any reader
// gets the same floats.
float formula_at(std::uint64_t i) {
  return static_cast<float>(std::sin(static_cast<double>(i) + 1.0));
}

float uniform_at(std::uint64_t key, std::uint64_t stream, std::uint64_t i, float bound) {
  const philox::Block b = philox::at(key, stream, i);
  return (2.0f * philox::to_unit_open(b.v[0]) - 1.0f) * bound;
}

}  // namespace

std::string join_name(std::string_view prefix, std::string_view name) {
  if (prefix.empty()) return std::string(name);
  std::string s(prefix);
  s += '.';
  s += name;
  return s;
}

Init Init::child(std::size_t index) const {
  Init c = *this;
  c.path_ = join_name(path_, std::to_string(index));
  return c;
}

Init Init::named_child(std::string_view name) const {
  Init c = *this;
  c.path_ = join_name(path_, name);
  return c;
}

std::uint64_t Init::stream_of(std::string_view name) const { return fnv1a(join_name(path_, name)); }

Param Init::weight(std::string_view name, Shape shape, std::int64_t fan_in,
                   std::int64_t fan_out) const {
  Param p(std::move(shape), target_, Decay::Apply);
  std::vector<float> host(static_cast<std::size_t>(p.numel()));
  const std::uint64_t stream = stream_of(name);
  const float fi = static_cast<float>(fan_in);
  const float fo = static_cast<float>(fan_out);
  for (std::size_t i = 0; i < host.size(); ++i) {
    switch (spec_.kind) {
      case InitKind::KaimingNormal:
        host[i] = normal_at(spec_.seed, stream, i, 0.0f, std::sqrt(2.0f / fi));
        break;
      case InitKind::KaimingUniform:
        host[i] = uniform_at(spec_.seed, stream, i, std::sqrt(6.0f / fi));
        break;
      case InitKind::XavierNormal:
        host[i] = normal_at(spec_.seed, stream, i, 0.0f, std::sqrt(2.0f / (fi + fo)));
        break;
      case InitKind::XavierUniform:
        host[i] = uniform_at(spec_.seed, stream, i, std::sqrt(6.0f / (fi + fo)));
        break;
      case InitKind::Normal:
        host[i] = normal_at(spec_.seed, stream, i, spec_.mean, spec_.std);
        break;
      case InitKind::Zero:
        host[i] = 0.0f;
        break;
      case InitKind::Deterministic:
        host[i] = std::sqrt(3.0f / fi) * formula_at(i);
        break;
    }
  }
  p.val.copy_from(host);
  return p;
}

Param Init::constant(std::string_view, Shape shape, float value) const {
  Param p(std::move(shape), target_, Decay::Skip);
  if (value != 0.0f) {
    std::vector<float> host(static_cast<std::size_t>(p.numel()), value);
    p.val.copy_from(host);
  }
  return p;
}

Param Init::normal(std::string_view name, Shape shape, float mean, float std) const {
  Param p(std::move(shape), target_, Decay::Apply);
  std::vector<float> host(static_cast<std::size_t>(p.numel()));
  const std::uint64_t stream = stream_of(name);
  for (std::size_t i = 0; i < host.size(); ++i) {
    host[i] = spec_.kind == InitKind::Deterministic
                  ? mean + std * std::numbers::sqrt2_v<float> * formula_at(i)
                  : normal_at(spec_.seed, stream, i, mean, std);
  }
  p.val.copy_from(host);
  return p;
}

Param Init::uniform(std::string_view name, Shape shape, float bound, Decay decay) const {
  Param p(std::move(shape), target_, decay);
  std::vector<float> host(static_cast<std::size_t>(p.numel()));
  const std::uint64_t stream = stream_of(name);
  for (std::size_t i = 0; i < host.size(); ++i) {
    host[i] = spec_.kind == InitKind::Deterministic ? bound * formula_at(i)
                                                     : uniform_at(spec_.seed, stream, i, bound);
  }
  p.val.copy_from(host);
  return p;
}

}  // namespace noeira
