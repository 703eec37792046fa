#include "train/weights_file.hpp"

#include <optional>
#include <set>
#include <vector>

#include "io/params_file.hpp"
#include "kernels/error.hpp"
#include "train/model_buffers.hpp"
#include "nn/gpt.hpp"
#include "train/model_catalogue.hpp"

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
Shape stored_shape(const ForeignName& f, const Shape& walk_shape, NameScheme scheme) {
  Shape s = walk_shape;
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
    out.push_back({f.name, stored_shape(f, t.tensor->shape(), names.scheme()), values.back(),
                   as_integer ? io::StDtype::I64 : io::StDtype::F32});
  }
  std::map<std::string, std::string> metadata = attributes;
  metadata["format"] = std::string(kSafetensorsFormat);
  metadata["format_version"] = std::to_string(kFormatVersion);
  metadata["model"] = std::string(model);
  metadata["names"] = std::string(kNameSchemeNames.name_of(names.scheme()));
  io::save_safetensors(file, out, metadata);
}

namespace {

// The map a file is read with, from the names of the walk's parameters (see the header).
NameMap map_for(const io::SafetensorsFile& file, std::optional<NameScheme> requested,
                std::string_view model, const std::vector<std::string>& param_names) {
  if (requested) return NameMap::for_preset(*requested, model);
  const auto stored = file.metadata().find("names");
  if (stored != file.metadata().end()) {
    return NameMap::for_preset(kNameSchemeNames.parse(stored->second), model);
  }
  // The MLPs' first layer is "0.weight" under both maps: only all of the walk's names tell.
  bool own_names = true;
  for (const std::string& name : param_names) {
    own_names = own_names && file.find(name) != nullptr;
  }
  return NameMap::for_preset(own_names ? NameScheme::Noeira : NameScheme::Pytorch, model);
}

// A tensor a file must hold for the walk: its walk name and shape.
struct WalkSpec {
  std::string name;
  Shape shape;
};

std::vector<WalkSpec> specs_of(const std::vector<WalkTensor>& tensors) {
  std::vector<WalkSpec> out;
  for (const WalkTensor& t : tensors) out.push_back({*t.name, t.tensor->shape()});
  return out;
}

std::vector<std::string> param_names(const dist::WalkUnits& walk) {
  std::vector<std::string> out;
  for (const NamedParam& p : walk.params) out.push_back(p.name);
  return out;
}

// The file's table of contents against the walk, before a value is read: the model the file
// names, every walk tensor present with its shape, and no tensor beyond them (a tensor the model
// does not use means another network, never something to drop). The map may leave a few stored
// tensors unread (GPT-2's mask buffers); a copy of a tied tensor (GPT-2's lm_head.weight beside
// transformer.wte.weight) is taken only when it is the same bits as what it copies: the presets
// tie the head to the token embedding, so a head of its own could not be loaded, and dropping it
// would give another network than the file's. Returns the entry of each walk tensor, in order.
std::vector<const io::StEntry*> check_table(const io::SafetensorsFile& file,
                                            std::string_view model, const NameMap& names,
                                            const std::vector<WalkSpec>& walk) {
  const std::string path = file.path().string();
  const auto stored_model = file.metadata().find("model");
  if (stored_model != file.metadata().end() && stored_model->second != model) {
    throw InputError(detail::concat(path, ": holds weights of model '", stored_model->second,
                                    "', not '", model, "'"));
  }
  const std::string_view scheme = kNameSchemeNames.name_of(names.scheme());
  std::vector<const io::StEntry*> entries;
  std::set<std::string> used;
  for (const WalkSpec& t : walk) {
    const ForeignName f = names.map(t.name);
    const std::string what = describe(f, t.name);
    const io::StEntry* entry = file.find(f.name);
    if (entry == nullptr) {
      throw InputError(detail::concat(path, ": ", what, " is missing (model '", model,
                                      "', --names ", scheme, ")"));
    }
    const Shape expected = stored_shape(f, t.shape, names.scheme());
    // A counter only needs its element count: noeira's is [1], PyTorch's 0-d.
    const bool fits = f.counter ? shape_numel(entry->shape) == shape_numel(t.shape)
                                : entry->shape == expected;
    if (!fits) {
      throw InputError(detail::concat(path, ": ", what, " has shape ", shape_string(entry->shape),
                                      ", the model expects ", shape_string(expected)));
    }
    entries.push_back(entry);
    used.insert(f.name);
  }
  for (const io::StEntry& e : file.entries()) {
    if (used.count(e.name) != 0) continue;
    if (!names.ignorable(e.name)) {
      throw InputError(detail::concat(path, ": has tensor '", e.name, "', which model '", model,
                                      "' does not (--names ", scheme, ")"));
    }
    const std::optional<std::string> original = names.copy_of(e.name);
    const io::StEntry* tied = original ? file.find(*original) : nullptr;
    if (original && (tied == nullptr || !file.same_bytes(e, *tied))) {
      throw InputError(detail::concat(path, ": has tensor '", e.name,
                                      "', a head of its own: model '", model, "' ties it to '",
                                      *original, "', and the file's two differ"));
    }
  }
  return entries;
}

// The walk of a GPT preset (nn/gpt.hpp, nn/gpt_parts.hpp), in its order, from the shape alone:
// gpt2-124m takes 1 GB to build, which a file that cannot fit it must not cost. A test holds it
// to the walk of built models.
std::vector<WalkSpec> gpt_walk(const GptShape& g) {
  const std::int64_t c = g.width;
  std::vector<WalkSpec> out{{"wpe.weight", {g.block, c}}};
  for (std::int64_t i = 0; i < g.layers; ++i) {
    const std::string h = detail::concat("h.", i, ".");
    const WalkSpec block[] = {
        {h + "ln_1.weight", {c}},          {h + "ln_1.bias", {c}},
        {h + "attn.qkv.weight", {3 * c, c}}, {h + "attn.qkv.bias", {3 * c}},
        {h + "attn.proj.weight", {c, c}},  {h + "attn.proj.bias", {c}},
        {h + "ln_2.weight", {c}},          {h + "ln_2.bias", {c}},
        {h + "mlp.0.weight", {4 * c, c}},  {h + "mlp.0.bias", {4 * c}},
        {h + "mlp.1.weight", {c, 4 * c}},  {h + "mlp.1.bias", {c}},
    };
    out.insert(out.end(), std::begin(block), std::end(block));
  }
  out.push_back({"ln_f.weight", {c}});
  out.push_back({"ln_f.bias", {c}});
  out.push_back({"lm_head.weight", {g.vocab, c}});
  return out;
}

// The walk of model `model` where it is known without building the model: the GPTs. The other
// models are built first and checked then: the largest preset, resnet18, takes about 90 MB.
std::optional<std::vector<WalkSpec>> unbuilt_walk(std::string_view model) {
  const ModelEntry& entry = model_catalogue().find(model);
  if (entry.gpt_shape == nullptr) return std::nullopt;
  return gpt_walk(*entry.gpt_shape);
}

}  // namespace

std::vector<std::pair<std::string, Shape>> unbuilt_walk_for_tests(std::string_view model) {
  std::vector<std::pair<std::string, Shape>> out;
  if (const auto walk = unbuilt_walk(model)) {
    for (const WalkSpec& t : *walk) out.emplace_back(t.name, t.shape);
  }
  return out;
}

NameMap reading_name_map(const io::SafetensorsFile& file, std::optional<NameScheme> requested,
                         std::string_view model, const dist::WalkUnits& walk) {
  return map_for(file, requested, model, param_names(walk));
}

void load_weights_safetensors(const io::SafetensorsFile& file, std::string_view model,
                              const NameMap& names, const dist::WalkUnits& walk,
                              NonFinite non_finite) {
  const std::string path = file.path().string();
  const std::vector<WalkTensor> tensors = walk_tensors(walk);
  const std::vector<const io::StEntry*> entries =
      check_table(file, model, names, specs_of(tensors));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const WalkTensor& t = tensors[i];
    const io::StEntry& entry = *entries[i];
    const ForeignName f = names.map(*t.name);
    std::vector<float> v = f.counter ? file.read_counter(entry) : file.read_float(entry);
    if (f.transposed) v = transposed(v, t.tensor->shape()[1], t.tensor->shape()[0]);
    refuse_non_finite(v, non_finite, detail::concat(path, ": ", describe(f, *t.name)), "load");
    t.tensor->copy_from(v);
  }
}

void check_weights_before_building(const io::SafetensorsFile& file, std::string_view model,
                                   std::optional<NameScheme> requested) {
  const std::optional<std::vector<WalkSpec>> walk = unbuilt_walk(model);
  if (!walk) return;
  std::vector<std::string> params;
  for (const WalkSpec& t : *walk) params.push_back(t.name);
  (void)check_table(file, model, map_for(file, requested, model, params), *walk);
}

void load_weights_file(const std::filesystem::path& file, std::string_view model,
                       std::optional<NameScheme> requested, const dist::WalkUnits& walk,
                       NonFinite non_finite) {
  if (io::is_safetensors_path(file)) {
    const io::SafetensorsFile st = io::SafetensorsFile::open(file);
    load_weights_safetensors(st, model, reading_name_map(st, requested, model, walk), walk,
                             non_finite);
    return;
  }
  if (file.extension() == ".h5") {
    if (requested && *requested != NameScheme::Noeira) {
      throw InputError(detail::concat(file.string(),
                                      ": a model.h5 has noeira's names only, not --names ",
                                      kNameSchemeNames.name_of(*requested)));
    }
    io::load_params(file, model, walk.params, non_finite, walk.buffers);
    return;
  }
  throw InputError(detail::concat(file.string(), ": unknown weights file extension '",
                                  file.extension().string(),
                                  "' (expected .safetensors or .h5)"));
}

}  // namespace noeira
