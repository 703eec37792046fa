#include "io/params_file.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <set>
#include <system_error>

#include "core/tensor.hpp"
#include "io/checkpoint_format.hpp"
#include "io/h5.hpp"
#include "io/temporary_file.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

namespace {

constexpr const char* kFormat = "noeira-params";

std::string dataset_path(const std::string& name) { return "params/" + name + "/val"; }
std::string buffer_path(const std::string& name) { return "buffers/" + name; }

// Refuses non-finite values of the tensors `signature` lays out in `values`, naming the tensor.
void check_values(const std::filesystem::path& file, const Signature& signature,
                  std::span<const float> values, NonFinite non_finite, const char* kind) {
  std::int64_t total = 0;
  for (const SignatureEntry& e : signature) total += shape_numel(e.shape);
  NOEIRA_CHECK(total == static_cast<std::int64_t>(values.size()), file.string(), ": ",
               values.size(), " values for ", kind, "s of ", total, " elements");
  std::size_t begin = 0;
  for (const SignatureEntry& e : signature) {
    const auto n = static_cast<std::size_t>(shape_numel(e.shape));
    refuse_non_finite(values.subspan(begin, n), non_finite,
                      detail::concat(file.string(), ": ", kind, " '", e.name, "'"), "save");
    begin += n;
  }
}

// Writes each tensor of `signature` from `values` at path_of(name) (the caller holds the lock).
template <class PathOf>
void write_tensors(hid_t f, hid_t lcpl, const std::filesystem::path& tmp,
                   const Signature& signature, std::span<const float> values, PathOf path_of) {
  std::size_t at = 0;
  for (const SignatureEntry& entry : signature) {
    const Shape& shape = entry.shape;
    std::vector<hsize_t> dims(shape.begin(), shape.end());
    h5::Handle space(NOEIRA_H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(),
                                                      nullptr),
                                     tmp),
                     H5Sclose);
    h5::Handle ds(NOEIRA_H5_CHECK(H5Dcreate2(f, path_of(entry.name).c_str(), H5T_IEEE_F32LE,
                                             space.get(), lcpl, H5P_DEFAULT, H5P_DEFAULT),
                                  tmp),
                  H5Dclose);
    NOEIRA_H5_CHECK(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                             values.data() + at),
                    tmp);
    const auto n = static_cast<std::size_t>(shape_numel(shape));
    h5::write_u32_attr(ds.get(), ckpt::kAttrCrc, ckpt::crc32_of(values.subspan(at, n)), tmp);
    at += n;
  }
}

constexpr const char* kRoot = "the root group";

// What a root attribute may hold.
bool is_name(std::string_view v) {
  return !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.' || c == '+';
  });
}
bool is_count(std::string_view v) {
  std::int64_t n = -1;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  return !v.empty() && ec == std::errc() && end == v.data() + v.size() && n >= 0 &&
         (v.size() == 1 || v[0] != '0') && v[0] != '-' && v[0] != '+';
}
bool is_positive(std::string_view v) { return is_count(v) && v != "0"; }
bool is_printable(std::string_view v) {
  return std::all_of(v.begin(), v.end(),
                     [](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; });
}
bool is_list(std::string_view v) {
  return v.size() >= 2 && v.front() == '[' && v.back() == ']' && is_printable(v);
}
bool is_tokenizer(std::string_view v) { return v == "char" || v == "byte" || v == "gpt2"; }
bool is_recorded_loss(std::string_view v) { return v == "gaussian-nll"; }
bool is_vocabulary(std::string_view v) {
  return v.starts_with("noeira-tokenizer ") &&
         std::all_of(v.begin(), v.end(), [](char c) {
           return c == '\n' || (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
         });
}

struct RootAttribute {
  std::string_view name;
  std::size_t max_bytes;
  bool (*valid)(std::string_view);
  const char* expected;  // for the message
};

// Every string attribute of the root group that noeira writes (io::save_params, the description
// of train/model_description.hpp) and what it may hold. Parsing and the agreement with the model
// are the readers' (load_params: parameters; train/saved_model.cpp: the rest).
constexpr RootAttribute kRootAttributes[] = {
    {"model", ckpt::kMaxNameBytes, is_name, "a model preset name"},
    {"data", ckpt::kMaxNameBytes, is_name, "a data set name"},
    {"parameters", 19, is_count, "a decimal count"},
    {"block", 19, is_positive, "a positive decimal count"},
    {"tokenizer", 4, is_tokenizer, "char, byte or gpt2"},
    {"vocabulary", ckpt::kMaxTextBytes, is_vocabulary, "a serialized tokenizer"},
    {"input", 4096, is_printable, "a line of text"},
    {"output", 4096, is_printable, "a line of text"},
    {"input_shape", 65536, is_list, "a JSON list"},
    {"input_mean", ckpt::kMaxTextBytes, is_list, "a JSON list"},
    {"input_std", ckpt::kMaxTextBytes, is_list, "a JSON list"},
    {"labels", 65536, is_list, "a JSON list"},
    {"loss", 16, is_recorded_loss, "gaussian-nll (the one loss a model.h5 records)"},
};

const RootAttribute* root_attribute(std::string_view name) {
  for (const RootAttribute& a : kRootAttributes) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

[[noreturn]] void refuse_attribute(const std::filesystem::path& file, std::string_view name,
                                   std::string_view problem) {
  throw InputError(
      detail::concat(file.string(), ": ", kRoot, ": attribute '", name, "' ", problem));
}

// A parameters file open for reading, its root checked (the caller holds the HDF5 lock).
struct ParamsFile {
  h5::Handle f;
  std::int64_t version = 0;
  std::map<std::string, std::string> attributes;  // the known ones present, checked
};

// Opens a parameters file for reading; anything that is not one, or whose root attributes lie,
// is an InputError naming the file (and the attribute).
ParamsFile open_for_reading(const std::filesystem::path& file) {
  ParamsFile out;
  out.f = h5::open_for_reading(file);
  const hid_t f = out.f.get();
  if (!h5::has_attr(f, "format", file)) {
    throw InputError(detail::concat(file.string(), ": not a noeira parameters file"));
  }
  const std::string format = h5::read_string_attr(f, "format", file, kRoot, ckpt::kMaxNameBytes);
  if (format != kFormat) {
    throw InputError(detail::concat(file.string(), ": format '", format, "', expected '",
                                    kFormat, "'"));
  }
  out.version = h5::read_i64_attr(f, "format_version", file, kRoot);
  if (out.version < 1 || out.version > kParamsFormatVersion) {
    refuse_attribute(file, "format_version",
                     detail::concat("is ", out.version, ", this build reads versions 1 to ",
                                    kParamsFormatVersion));
  }
  for (const RootAttribute& a : kRootAttributes) {
    const std::string name(a.name);
    if (!h5::has_attr(f, name.c_str(), file)) continue;
    std::string value = h5::read_string_attr(f, name.c_str(), file, kRoot, a.max_bytes);
    if (!a.valid(value)) refuse_attribute(file, a.name, detail::concat("is not ", a.expected));
    out.attributes.emplace(name, std::move(value));
  }
  const auto& attrs = out.attributes;
  if (attrs.count("model") == 0) refuse_attribute(file, "model", "is missing");
  // A language model's attributes and an image classifier's exclude each other, and the
  // tokenizer is the vocabulary's kind ("noeira-tokenizer 1\nchar 113\n...").
  const auto vocabulary = attrs.find("vocabulary");
  for (const char* text_only : {"tokenizer", "block"}) {
    if (attrs.count(text_only) != 0 && vocabulary == attrs.end()) {
      refuse_attribute(file, text_only, "is there without a vocabulary");
    }
  }
  if (vocabulary != attrs.end()) {
    for (const char* image_only : {"input_shape", "input_mean", "input_std", "labels", "loss"}) {
      if (attrs.count(image_only) != 0) {
        refuse_attribute(file, image_only, "describes images, but the file holds a vocabulary");
      }
    }
    const auto tokenizer = attrs.find("tokenizer");
    if (tokenizer != attrs.end()) {
      // The second line's first word.
      const std::string_view v = vocabulary->second;
      const std::size_t line = std::min(v.find('\n'), v.size());
      const std::string_view rest = v.substr(std::min(line + 1, v.size()));
      const std::string_view kind = rest.substr(0, rest.find_first_of(" \n"));
      if (kind != tokenizer->second) {
        refuse_attribute(file, "tokenizer",
                         detail::concat("is '", tokenizer->second,
                                        "', but the vocabulary is of another kind"));
      }
    }
  }
  return out;
}

std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Reads the dataset at `path` into a host vector after checking it (h5::open_dataset: a plain
// little-endian float32 dataset stored in this file) and its shape, then its checksum; `what`
// names it in errors ("parameter '0.weight'").
std::vector<float> read_tensor(const ParamsFile& pf, const std::filesystem::path& file,
                               const std::string& path, const Shape& expected,
                               const std::string& what, NonFinite non_finite) {
  const hid_t f = pf.f.get();
  if (!h5::path_exists(f, path, file)) {
    throw InputError(detail::concat(file.string(), ": ", what, " is missing"));
  }
  const h5::Dataset ds = h5::open_dataset(f, path, h5::DatasetSpec{H5T_IEEE_F32LE, 0, -1}, file);
  const Shape& shape = ds.dims;
  if (shape != expected) {
    throw InputError(detail::concat(file.string(), ": ", what, " has shape ", shape_string(shape),
                                    ", the model expects ", shape_string(expected)));
  }
  // Sized by the model, not by the file.
  std::vector<float> values(static_cast<std::size_t>(shape_numel(expected)));
  if (!values.empty()) {
    NOEIRA_H5_CHECK_INPUT(H5Dread(ds.handle.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL,
                                  H5P_DEFAULT, values.data()),
                          file);
  }
  const std::string where = detail::concat(what, " (dataset '", path, "')");
  const hid_t id = ds.handle.get();
  // Version 2 on: every tensor has its checksum. A version-1 file has none (written before
  // checksums); one that has a "crc32" anyway gets it checked.
  if (pf.version >= kParamsChecksumVersion || h5::has_attr(id, ckpt::kAttrCrc, file)) {
    const std::uint32_t stored = h5::read_u32_attr(id, ckpt::kAttrCrc, file, where);
    const std::uint32_t crc = ckpt::crc32_of(values);
    if (crc != stored) {
      throw InputError(detail::concat(file.string(), ": ", where, ": checksum mismatch (stored ",
                                      hex(stored), ", read ", hex(crc),
                                      "): the file is corrupted"));
    }
  }
  refuse_non_finite(values, non_finite, detail::concat(file.string(), ": ", what), "load");
  return values;
}

}  // namespace

void save_params(const std::filesystem::path& file, std::string_view model,
                 const Signature& signature, std::span<const float> values,
                 const std::map<std::string, std::string>& attributes, NonFinite non_finite,
                 const Signature& buffers, std::span<const float> buffer_values) {
  // Before anything is created: a refused file leaves no trace.
  check_values(file, signature, values, non_finite, "parameter");
  check_values(file, buffers, buffer_values, non_finite, "buffer");
  TemporaryFile written(file);
  const std::filesystem::path& tmp = written.path();
  {
    h5::Lock held = h5::lock();
    // HDF5 1.8's format at least: an attribute past 64 KiB (a normalization of many features,
    // train/feature_normalization.hpp) is stored densely instead of failing the write.
    h5::Handle fapl(NOEIRA_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS), tmp), H5Pclose);
    NOEIRA_H5_CHECK(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST), tmp);
    const hid_t id = H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
    if (id < 0) throw written.cannot_create();
    h5::Handle f(id, H5Fclose);
    h5::write_string_attr(f.get(), "format", kFormat, tmp);
    h5::write_i64_attr(f.get(), "format_version", kParamsFormatVersion, tmp);
    h5::write_string_attr(f.get(), "model", model, tmp);
    for (const auto& [name, value] : attributes) {
      h5::write_string_attr(f.get(), name.c_str(), value, tmp);
    }
    // "params/0.weight/val" needs its groups: let HDF5 create them on the way.
    h5::Handle lcpl(NOEIRA_H5_CHECK(H5Pcreate(H5P_LINK_CREATE), tmp), H5Pclose);
    NOEIRA_H5_CHECK(H5Pset_create_intermediate_group(lcpl.get(), 1), tmp);
    write_tensors(f.get(), lcpl.get(), tmp, signature, values, dataset_path);
    write_tensors(f.get(), lcpl.get(), tmp, buffers, buffer_values, buffer_path);
    f.close(tmp);  // a failed close (metadata flush) must not pass for a written file
  }
  written.commit();
}

std::map<std::string, std::string> read_params_attributes(const std::filesystem::path& file) {
  h5::Lock held = h5::lock();
  return open_for_reading(file).attributes;
}

std::optional<std::string> read_params_attribute(const std::filesystem::path& file,
                                                 const std::string& name) {
  h5::Lock held = h5::lock();
  const ParamsFile pf = open_for_reading(file);
  if (root_attribute(name) != nullptr) {
    const auto it = pf.attributes.find(name);
    if (it == pf.attributes.end()) return std::nullopt;
    return it->second;
  }
  if (!h5::has_attr(pf.f.get(), name.c_str(), file)) return std::nullopt;
  return h5::read_string_attr(pf.f.get(), name.c_str(), file, kRoot);
}

std::string read_params_model(const std::filesystem::path& file) {
  h5::Lock held = h5::lock();
  return open_for_reading(file).attributes.at("model");
}

void load_params(const std::filesystem::path& file, std::string_view model,
                 const std::vector<NamedParam>& params, NonFinite non_finite,
                 const std::vector<NamedBuffer>& buffers) {
  h5::Lock held = h5::lock();
  const ParamsFile pf = open_for_reading(file);
  const std::string& stored = pf.attributes.at("model");
  if (stored != model) {
    throw InputError(detail::concat(file.string(), ": holds parameters of model '", stored,
                                    "', not '", model, "'"));
  }
  std::int64_t count = 0;
  for (const NamedParam& np : params) count += np.param->numel();
  const auto parameters = pf.attributes.find("parameters");
  if (parameters != pf.attributes.end() && parameters->second != std::to_string(count)) {
    refuse_attribute(file, "parameters",
                     detail::concat("is ", parameters->second, ", but model '", model, "' has ",
                                    count, " (and so do the file's tensors, or they are refused)"));
  }
  // Every link in the file, before any tensor is read: hard links to groups and datasets only.
  const std::vector<std::string> stored_paths = h5::dataset_paths(pf.f.get(), file, {});
  std::set<std::string> expected;
  for (const NamedParam& np : params) {
    const std::string path = dataset_path(np.name);
    expected.insert(path);
    np.param->val.copy_from(read_tensor(pf, file, path, np.param->shape(),
                                        detail::concat("parameter '", np.name, "'"), non_finite));
  }
  for (const NamedBuffer& nb : buffers) {
    const std::string path = buffer_path(nb.name);
    expected.insert(path);
    nb.tensor->copy_from(read_tensor(pf, file, path, nb.tensor->shape(),
                                     detail::concat("buffer '", nb.name, "'"), non_finite));
  }
  // A tensor the model does not have means the file and the model disagree on the network.
  for (const std::string& path : stored_paths) {
    if (expected.count(path) == 0) {
      throw InputError(detail::concat(file.string(), ": has ", h5::quote_name(path),
                                      ", which model '", model, "' does not"));
    }
  }
}

}  // namespace noeira::io
