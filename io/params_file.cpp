#include "io/params_file.hpp"

#include <set>
#include <system_error>

#include "core/tensor.hpp"
#include "io/h5.hpp"
#include "io/file_kind.hpp"
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
    at += static_cast<std::size_t>(shape_numel(shape));
  }
}

// Reads the dataset at `path` into a host vector after checking it has `expected` shape; `what`
// names it in errors ("parameter '0.weight'").
std::vector<float> read_tensor(hid_t f, const std::filesystem::path& file, const std::string& path,
                               const Shape& expected, const std::string& what,
                               NonFinite non_finite) {
  if (!h5::path_exists(f, path, file)) {
    throw InputError(detail::concat(file.string(), ": ", what, " is missing"));
  }
  h5::Handle ds(NOEIRA_H5_CHECK_INPUT(H5Dopen2(f, path.c_str(), H5P_DEFAULT), file), H5Dclose);
  h5::Handle space(NOEIRA_H5_CHECK_INPUT(H5Dget_space(ds.get()), file), H5Sclose);
  const int rank = NOEIRA_H5_CHECK_INPUT(H5Sget_simple_extent_ndims(space.get()), file);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  NOEIRA_H5_CHECK_INPUT(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), file);
  const Shape shape(dims.begin(), dims.end());
  if (shape != expected) {
    throw InputError(detail::concat(file.string(), ": ", what, " has shape ", shape_string(shape),
                                    ", the model expects ", shape_string(expected)));
  }
  std::vector<float> values(static_cast<std::size_t>(shape_numel(expected)));
  NOEIRA_H5_CHECK_INPUT(
      H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), file);
  refuse_non_finite(values, non_finite, detail::concat(file.string(), ": ", what), "load");
  return values;
}

// Opens a parameters file for reading (the caller holds the HDF5 lock); anything that is not one
// is an InputError naming the file.
h5::Handle open_for_reading(const std::filesystem::path& file) {
  require_regular_file(file);
  if (H5Fis_hdf5(file.c_str()) <= 0) {
    throw InputError(detail::concat(file.string(), ": not an HDF5 file"));
  }
  h5::Handle f(NOEIRA_H5_CHECK_INPUT(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), file),
               H5Fclose);
  if (!h5::has_attr(f.get(), "format", file)) {
    throw InputError(detail::concat(file.string(), ": not a noeira parameters file"));
  }
  const std::string format = h5::read_string_attr(f.get(), "format", file, "the root group");
  if (format != kFormat) {
    throw InputError(detail::concat(file.string(), ": format '", format, "', expected '",
                                    kFormat, "'"));
  }
  return f;
}

}  // namespace

void save_params(const std::filesystem::path& file, std::string_view model,
                 const Signature& signature, std::span<const float> values,
                 const std::map<std::string, std::string>& attributes, NonFinite non_finite,
                 const Signature& buffers, std::span<const float> buffer_values) {
  // Before anything is created: a refused file leaves no trace.
  check_values(file, signature, values, non_finite, "parameter");
  check_values(file, buffers, buffer_values, non_finite, "buffer");
  std::filesystem::path tmp = file;
  tmp += ".tmp";
  {
    h5::Lock held = h5::lock();
    const hid_t id = H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (id < 0) throw InputError(detail::concat(tmp.string(), ": cannot create the file"));
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
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) {
    throw InputError(detail::concat(file.string(), ": cannot move the written file into place (",
                                    ec.message(), ")"));
  }
}

std::optional<std::string> read_params_attribute(const std::filesystem::path& file,
                                                 const std::string& name) {
  h5::Lock held = h5::lock();
  h5::Handle f = open_for_reading(file);
  if (!h5::has_attr(f.get(), name.c_str(), file)) return std::nullopt;
  return h5::read_string_attr(f.get(), name.c_str(), file, "the root group");
}

std::string read_params_model(const std::filesystem::path& file) {
  h5::Lock held = h5::lock();
  h5::Handle f = open_for_reading(file);
  return h5::read_string_attr(f.get(), "model", file, "the root group");
}

void load_params(const std::filesystem::path& file, std::string_view model,
                 const std::vector<NamedParam>& params, NonFinite non_finite,
                 const std::vector<NamedBuffer>& buffers) {
  h5::Lock held = h5::lock();
  h5::Handle f = open_for_reading(file);
  const std::string stored = h5::read_string_attr(f.get(), "model", file, "the root group");
  if (stored != model) {
    throw InputError(detail::concat(file.string(), ": holds parameters of model '", stored,
                                    "', not '", model, "'"));
  }
  std::set<std::string> expected;
  for (const NamedParam& np : params) {
    const std::string path = dataset_path(np.name);
    expected.insert(path);
    np.param->val.copy_from(read_tensor(f.get(), file, path, np.param->shape(),
                                        detail::concat("parameter '", np.name, "'"), non_finite));
  }
  for (const NamedBuffer& nb : buffers) {
    const std::string path = buffer_path(nb.name);
    expected.insert(path);
    nb.tensor->copy_from(read_tensor(f.get(), file, path, nb.tensor->shape(),
                                     detail::concat("buffer '", nb.name, "'"), non_finite));
  }
  // A tensor the model does not have means the file and the model disagree on the network.
  for (const std::string& path : h5::dataset_paths(f.get(), file, {})) {
    if (expected.count(path) == 0) {
      throw InputError(detail::concat(file.string(), ": has '", path, "', which model '", model,
                                      "' does not"));
    }
  }
}

}  // namespace noeira::io
