#include "train/model_buffers.hpp"

#include <set>
#include <span>

#include "kernels/error.hpp"

namespace noeira {

namespace {
constexpr std::string_view kBufferPrefix = "buffers/";
}  // namespace

std::string buffer_tensor_name(const std::string& buffer) {
  return std::string(kBufferPrefix) + buffer;
}

io::Signature buffer_signature(const dist::WalkUnits& walk) {
  io::Signature sig;
  for (const NamedBuffer& b : walk.buffers) sig.push_back({b.name, b.tensor->shape()});
  return sig;
}

std::vector<float> buffer_values(const dist::WalkUnits& walk) {
  std::vector<float> all;
  for (const NamedBuffer& b : walk.buffers) {
    const std::vector<float> v = b.tensor->to_vector();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

std::vector<io::TensorSlice> buffer_slices(const dist::WalkUnits& walk,
                                           const std::vector<float>& host) {
  std::vector<io::TensorSlice> slices;
  std::size_t at = 0;
  for (const NamedBuffer& b : walk.buffers) {
    const auto n = static_cast<std::size_t>(b.tensor->numel());
    NOEIRA_CHECK(at + n <= host.size(), "buffer_slices: host values shorter than the buffers");
    slices.push_back({buffer_tensor_name(b.name), b.tensor->shape(), 0,
                      std::span<const float>(host.data() + at, n)});
    at += n;
  }
  return slices;
}

void load_buffers(const io::CheckpointReader& ckpt, const dist::WalkUnits& walk,
                  NonFinite non_finite) {
  const std::string where = ckpt.dir().string();
  std::set<std::string> expected;
  std::vector<float> values;
  for (const NamedBuffer& b : walk.buffers) {
    const std::string name = buffer_tensor_name(b.name);
    expected.insert(name);
    if (!ckpt.has(name)) {
      throw InputError(detail::concat(where, ": no buffer '", b.name,
                                      "' (written by a model without it?)"));
    }
    if (ckpt.shape(name) != b.tensor->shape()) {
      throw InputError(detail::concat(where, ": buffer '", b.name, "' has shape ",
                                      shape_string(ckpt.shape(name)), ", the model expects ",
                                      shape_string(b.tensor->shape())));
    }
    values.resize(static_cast<std::size_t>(b.tensor->numel()));
    ckpt.read(name, 0, std::span<float>(values));
    refuse_non_finite(values, non_finite, detail::concat(where, ": buffer '", b.name, "'"),
                      "load");
    b.tensor->copy_from(values);
  }
  for (const std::string& name : ckpt.tensor_names()) {
    if (name.starts_with(kBufferPrefix) && expected.count(name) == 0) {
      throw InputError(detail::concat(where, ": holds buffer '",
                                      name.substr(kBufferPrefix.size()),
                                      "', which this model does not have"));
    }
  }
}

}  // namespace noeira
