#include "train/weights_file.hpp"

#include <set>
#include <vector>

#include "io/params_file.hpp"
#include "kernels/error.hpp"
#include "train/model_buffers.hpp"

namespace noeira {

namespace {

constexpr int kFormatVersion = 1;

// One tensor of the walk, parameter or buffer, as the map sees it.
struct WalkTensor {
  const std::string* name;
  Tensor* tensor;
  const char* kind;  // "parameter" or "buffer", for messages
};

std::vector<WalkTensor> walk_tensors(const dist::WalkUnits& walk) {
  std::vector<WalkTensor> out;
  for (const NamedParam& p : walk.params) out.push_back({&p.name, &p.param->val, "parameter"});
  for (const NamedBuffer& b : walk.buffers) out.push_back({&b.name, b.tensor, "buffer"});
  return out;
}

// A row-major [rows, cols] matrix as its transpose [cols, rows].
std::vector<float> transposed(const std::vector<float>& values, std::int64_t rows,
                              std::int64_t cols) {
  std::vector<float> out(values.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      out[static_cast<std::size_t>(c * rows + r)] = values[static_cast<std::size_t>(r * cols + c)];
    }
  }
  return out;
}

// The tensor's shape as the map stores it.
Shape stored_shape(const ForeignName& f, const Tensor& t, NameScheme scheme) {
  Shape s = t.shape();
  if (f.transposed) {
    NOEIRA_CHECK(s.size() == 2, "a transposed tensor must be a matrix, '", f.name, "' is ",
                 shape_string(s));
    std::swap(s[0], s[1]);
  }
  // PyTorch's counters are 0-d; noeira keeps its own shape, so that its round trip is exact.
  if (f.counter && scheme == NameScheme::Pytorch) s.clear();
  return s;
}

// "tensor 'transformer.wte.weight' (noeira's 'lm_head.weight')".
std::string describe(const ForeignName& f, const std::string& walk_name) {
  if (f.name == walk_name) return detail::concat("tensor '", f.name, "'");
  return detail::concat("tensor '", f.name, "' (noeira's '", walk_name, "')");
}

}  // namespace

void save_weights_safetensors(const std::filesystem::path& file, std::string_view model,
                              const NameMap& names, const dist::WalkUnits& walk,
                              const std::map<std::string, std::string>& attributes,
                              NonFinite non_finite) {
  const std::vector<WalkTensor> tensors = walk_tensors(walk);
  std::vector<std::vector<float>> values;  // owns what `out` points at
  values.reserve(tensors.size());
  std::vector<io::StTensorOut> out;
  for (const WalkTensor& t : tensors) {
    const ForeignName f = names.map(*t.name);
    std::vector<float> v = t.tensor->to_vector();
    refuse_non_finite(v, non_finite,
                      detail::concat(file.string(), ": ", t.kind, " '", *t.name, "'"), "save");
    if (f.transposed) v = transposed(v, t.tensor->shape()[0], t.tensor->shape()[1]);
    values.push_back(std::move(v));
    const bool as_integer = f.counter && names.scheme() == NameScheme::Pytorch;
    out.push_back({f.name, stored_shape(f, *t.tensor, names.scheme()), values.back(),
                   as_integer ? io::StDtype::I64 : io::StDtype::F32});
  }
  std::map<std::string, std::string> metadata = attributes;
  metadata["format"] = std::string(kSafetensorsFormat);
  metadata["format_version"] = std::to_string(kFormatVersion);
  metadata["model"] = std::string(model);
  metadata["names"] = std::string(kNameSchemeNames.name_of(names.scheme()));
  io::save_safetensors(file, out, metadata);
}

NameMap reading_name_map(const io::SafetensorsFile& file, std::string_view requested,
                         std::string_view model, const dist::WalkUnits& walk) {
  if (!requested.empty()) return NameMap::for_preset(kNameSchemeNames.parse(requested), model);
  const auto stored = file.metadata().find("names");
  if (stored != file.metadata().end()) {
    return NameMap::for_preset(kNameSchemeNames.parse(stored->second), model);
  }
  // The MLPs' first layer is "0.weight" under both maps: only all of the walk's names tell.
  bool own_names = true;
  for (const NamedParam& p : walk.params) {
    own_names = own_names && file.find(p.name) != nullptr;
  }
  return NameMap::for_preset(own_names ? NameScheme::Noeira : NameScheme::Pytorch, model);
}

void load_weights_safetensors(const io::SafetensorsFile& file, std::string_view model,
                              const NameMap& names, const dist::WalkUnits& walk,
                              NonFinite non_finite) {
  const std::string path = file.path().string();
  const auto stored_model = file.metadata().find("model");
  if (stored_model != file.metadata().end() && stored_model->second != model) {
    throw InputError(detail::concat(path, ": holds weights of model '", stored_model->second,
                                    "', not '", model, "'"));
  }
  const std::string_view scheme = kNameSchemeNames.name_of(names.scheme());
  std::set<std::string> read;
  for (const WalkTensor& t : walk_tensors(walk)) {
    const ForeignName f = names.map(*t.name);
    const std::string what = describe(f, *t.name);
    const io::StEntry* entry = file.find(f.name);
    if (entry == nullptr) {
      throw InputError(detail::concat(path, ": ", what, " is missing (model '", model,
                                      "', --names ", scheme, ")"));
    }
    const Shape expected = stored_shape(f, *t.tensor, names.scheme());
    // A counter only needs its element count: noeira's is [1], PyTorch's 0-d.
    const bool fits = f.counter ? shape_numel(entry->shape) == t.tensor->numel()
                                : entry->shape == expected;
    if (!fits) {
      throw InputError(detail::concat(path, ": ", what, " has shape ", shape_string(entry->shape),
                                      ", the model expects ", shape_string(expected)));
    }
    std::vector<float> v = f.counter ? file.read_counter(*entry) : file.read_float(*entry);
    if (f.transposed) v = transposed(v, expected[0], expected[1]);
    refuse_non_finite(v, non_finite, detail::concat(path, ": ", what), "load");
    t.tensor->copy_from(v);
    read.insert(f.name);
  }
  // A tensor the model does not have means the file holds another network.
  for (const io::StEntry& e : file.entries()) {
    if (read.count(e.name) == 0 && !names.ignorable(e.name)) {
      throw InputError(detail::concat(path, ": has tensor '", e.name, "', which model '", model,
                                      "' does not (--names ", scheme, ")"));
    }
  }
}

void load_weights_file(const std::filesystem::path& file, std::string_view model,
                       std::string_view requested, const dist::WalkUnits& walk,
                       NonFinite non_finite) {
  if (io::is_safetensors_path(file)) {
    const io::SafetensorsFile st = io::SafetensorsFile::open(file);
    load_weights_safetensors(st, model, reading_name_map(st, requested, model, walk), walk,
                             non_finite);
    return;
  }
  if (file.extension() == ".h5") {
    if (!requested.empty() && requested != "noeira") {
      throw InputError(detail::concat(file.string(),
                                      ": a model.h5 has noeira's names only, not --names ",
                                      requested));
    }
    io::load_params(file, model, walk.params, non_finite, walk.buffers);
    return;
  }
  throw InputError(detail::concat(file.string(), ": unknown weights file extension '",
                                  file.extension().string(),
                                  "' (expected .safetensors or .h5)"));
}

}  // namespace noeira
