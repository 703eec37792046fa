#include "io/h5.hpp"

#include <algorithm>

#include "kernels/error.hpp"

namespace noeira::io::h5 {

Lock lock() {
  static std::recursive_mutex mutex;
  Lock held(mutex);
  static const bool silenced = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)silenced;
  return held;
}

void fail(Fault fault, const std::filesystem::path& file, const char* call, const char* source,
          int line) {
  // "H5Dread(ds.get(), ...)" -> "H5Dread": the arguments say nothing to a user.
  std::string_view name(call);
  name = name.substr(0, std::min(name.find('('), name.size()));
  if (fault == Fault::Input) {
    // The user's file is at fault, not our code: the message names the file, not our source.
    throw InputError(
        detail::concat(file.string(), ": truncated or corrupted HDF5 file (", name, " failed)"));
  }
  throw LibraryError(detail::concat(file.string(), ": HDF5 call failed: ", name, " [", source, ":",
                                    line, "]"));
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    close_ = other.close_;
    other.id_ = -1;
  }
  return *this;
}

void Handle::reset() noexcept {
  if (id_ >= 0) {
    Lock held = lock();
    close_(id_);
    id_ = -1;
  }
}

void Handle::close(const std::filesystem::path& file) {
  if (id_ < 0) return;
  Lock held = lock();
  const hid_t id = id_;
  id_ = -1;
  NOEIRA_H5_CHECK(close_(id), file);
}

Handle file_access(const std::filesystem::path& file) {
  Lock held = lock();
  Handle fapl(NOEIRA_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS), file), H5Pclose);
  NOEIRA_H5_CHECK(H5Pset_file_locking(fapl.get(), false, true), file);
  return fapl;
}

namespace {

Handle scalar_space(const std::filesystem::path& file) {
  return Handle(NOEIRA_H5_CHECK(H5Screate(H5S_SCALAR), file), H5Sclose);
}

Handle vector_space(std::size_t n, const std::filesystem::path& file) {
  const hsize_t dims[1] = {static_cast<hsize_t>(n)};
  return Handle(NOEIRA_H5_CHECK(H5Screate_simple(1, dims, nullptr), file), H5Sclose);
}

void write_attr(hid_t obj, const char* name, hid_t file_type, hid_t mem_type, const Handle& space,
                const void* data, const std::filesystem::path& file) {
  Lock held = lock();
  Handle attr(NOEIRA_H5_CHECK(
                  H5Acreate2(obj, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), file),
              H5Aclose);
  // An empty attribute (the shape of a 0-d tensor) has nothing to write, and HDF5 refuses a
  // null buffer.
  if (NOEIRA_H5_CHECK(H5Sget_simple_extent_npoints(space.get()), file) > 0) {
    NOEIRA_H5_CHECK(H5Awrite(attr.get(), mem_type, data), file);
  }
}

[[noreturn]] void attr_error(const std::filesystem::path& file, std::string_view where,
                             const char* name, std::string_view problem) {
  throw InputError(
      detail::concat(file.string(), ": ", where, ": attribute '", name, "' ", problem));
}

// Opens an attribute after checking its type class and element count (-1: any count, 1-D).
Handle open_attr(hid_t obj, const char* name, H5T_class_t cls, hssize_t count,
                 const std::filesystem::path& file, std::string_view where,
                 hssize_t* count_out = nullptr) {
  if (!has_attr(obj, name, file)) attr_error(file, where, name, "is missing");
  Handle attr(NOEIRA_H5_CHECK_INPUT(H5Aopen(obj, name, H5P_DEFAULT), file), H5Aclose);
  Handle type(NOEIRA_H5_CHECK_INPUT(H5Aget_type(attr.get()), file), H5Tclose);
  if (H5Tget_class(type.get()) != cls) attr_error(file, where, name, "has the wrong type");
  Handle space(NOEIRA_H5_CHECK_INPUT(H5Aget_space(attr.get()), file), H5Sclose);
  const int ndims = NOEIRA_H5_CHECK_INPUT(H5Sget_simple_extent_ndims(space.get()), file);
  const hssize_t n = NOEIRA_H5_CHECK_INPUT(H5Sget_simple_extent_npoints(space.get()), file);
  if (count >= 0 ? n != count : ndims != 1) {
    attr_error(file, where, name, "has the wrong number of elements");
  }
  if (count_out != nullptr) *count_out = n;
  return attr;
}

template <class T>
T read_scalar(hid_t obj, const char* name, H5T_class_t cls, hid_t mem_type,
              const std::filesystem::path& file, std::string_view where) {
  Lock held = lock();
  Handle attr = open_attr(obj, name, cls, 1, file, where);
  T value{};
  NOEIRA_H5_CHECK_INPUT(H5Aread(attr.get(), mem_type, &value), file);
  return value;
}

template <class T>
std::vector<T> read_vector(hid_t obj, const char* name, hid_t mem_type,
                           const std::filesystem::path& file, std::string_view where) {
  Lock held = lock();
  hssize_t n = 0;
  Handle attr = open_attr(obj, name, H5T_INTEGER, -1, file, where, &n);
  std::vector<T> values(static_cast<std::size_t>(n));
  if (n > 0) NOEIRA_H5_CHECK_INPUT(H5Aread(attr.get(), mem_type, values.data()), file);
  return values;
}

Handle string_type(std::size_t size, const std::filesystem::path& file) {
  Handle type(NOEIRA_H5_CHECK(H5Tcopy(H5T_C_S1), file), H5Tclose);
  NOEIRA_H5_CHECK(H5Tset_size(type.get(), std::max<std::size_t>(size, 1)), file);
  NOEIRA_H5_CHECK(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), file);
  return type;
}

std::string padded(std::string_view value) {
  std::string s(value);
  if (s.empty()) s.push_back('\0');  // HDF5 has no zero-length fixed strings
  return s;
}

std::string unpad(std::string s) {
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

}  // namespace

void write_string_attr(hid_t obj, const char* name, std::string_view value,
                       const std::filesystem::path& file) {
  Lock held = lock();
  const std::string data = padded(value);
  Handle type = string_type(data.size(), file);
  write_attr(obj, name, type.get(), type.get(), scalar_space(file), data.data(), file);
}

void write_i64_attr(hid_t obj, const char* name, std::int64_t value,
                    const std::filesystem::path& file) {
  Lock held = lock();
  write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, scalar_space(file), &value, file);
}

void write_u32_attr(hid_t obj, const char* name, std::uint32_t value,
                    const std::filesystem::path& file) {
  Lock held = lock();
  write_attr(obj, name, H5T_STD_U32LE, H5T_NATIVE_UINT32, scalar_space(file), &value, file);
}

void write_u64_attr(hid_t obj, const char* name, std::uint64_t value,
                    const std::filesystem::path& file) {
  Lock held = lock();
  write_attr(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, scalar_space(file), &value, file);
}

void write_f64_attr(hid_t obj, const char* name, double value, const std::filesystem::path& file) {
  Lock held = lock();
  write_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, scalar_space(file), &value, file);
}

void write_i64_array_attr(hid_t obj, const char* name, std::span<const std::int64_t> values,
                          const std::filesystem::path& file) {
  Lock held = lock();
  write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, vector_space(values.size(), file),
             values.data(), file);
}

void write_u32_array_attr(hid_t obj, const char* name, std::span<const std::uint32_t> values,
                          const std::filesystem::path& file) {
  Lock held = lock();
  write_attr(obj, name, H5T_STD_U32LE, H5T_NATIVE_UINT32, vector_space(values.size(), file),
             values.data(), file);
}

bool has_attr(hid_t obj, const char* name, const std::filesystem::path& file) {
  Lock held = lock();
  return NOEIRA_H5_CHECK_INPUT(H5Aexists(obj, name), file) > 0;
}

std::string read_string_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                             std::string_view where) {
  Lock held = lock();
  Handle attr = open_attr(obj, name, H5T_STRING, 1, file, where);
  Handle type(NOEIRA_H5_CHECK_INPUT(H5Aget_type(attr.get()), file), H5Tclose);
  if (H5Tis_variable_str(type.get()) != 0) {
    attr_error(file, where, name, "is not a fixed-length string");
  }
  std::string value(H5Tget_size(type.get()), '\0');
  NOEIRA_H5_CHECK_INPUT(H5Aread(attr.get(), type.get(), value.data()), file);
  return unpad(std::move(value));
}

std::int64_t read_i64_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                           std::string_view where) {
  return read_scalar<std::int64_t>(obj, name, H5T_INTEGER, H5T_NATIVE_INT64, file, where);
}

std::uint32_t read_u32_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                            std::string_view where) {
  return read_scalar<std::uint32_t>(obj, name, H5T_INTEGER, H5T_NATIVE_UINT32, file, where);
}

std::uint64_t read_u64_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                            std::string_view where) {
  return read_scalar<std::uint64_t>(obj, name, H5T_INTEGER, H5T_NATIVE_UINT64, file, where);
}

double read_f64_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                     std::string_view where) {
  return read_scalar<double>(obj, name, H5T_FLOAT, H5T_NATIVE_DOUBLE, file, where);
}

std::vector<std::int64_t> read_i64_array_attr(hid_t obj, const char* name,
                                              const std::filesystem::path& file,
                                              std::string_view where) {
  return read_vector<std::int64_t>(obj, name, H5T_NATIVE_INT64, file, where);
}

std::vector<std::uint32_t> read_u32_array_attr(hid_t obj, const char* name,
                                               const std::filesystem::path& file,
                                               std::string_view where) {
  return read_vector<std::uint32_t>(obj, name, H5T_NATIVE_UINT32, file, where);
}

namespace {
// HDF5 calls these from C: they must not throw, so they only collect names.
herr_t collect_attr(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}
herr_t collect_link(hid_t, const char* name, const H5L_info_t* info, void* out) {
  if (info->type == H5L_TYPE_HARD) static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}
}  // namespace

std::vector<std::string> attr_names(hid_t obj, const std::filesystem::path& file) {
  Lock held = lock();
  std::vector<std::string> names;
  hsize_t idx = 0;
  NOEIRA_H5_CHECK_INPUT(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_attr, &names),
                        file);
  return names;
}

void write_string_dataset(hid_t loc, const char* name, std::string_view value,
                          const std::filesystem::path& file) {
  Lock held = lock();
  const std::string data = padded(value);
  Handle type = string_type(data.size(), file);
  Handle space = scalar_space(file);
  Handle ds(NOEIRA_H5_CHECK(H5Dcreate2(loc, name, type.get(), space.get(), H5P_DEFAULT,
                                       H5P_DEFAULT, H5P_DEFAULT),
                            file),
            H5Dclose);
  NOEIRA_H5_CHECK(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()),
                  file);
}

std::string read_string_dataset(hid_t loc, const char* name, const std::filesystem::path& file) {
  Lock held = lock();
  if (!path_exists(loc, name, file)) {
    throw InputError(detail::concat(file.string(), ": dataset '", name, "' is missing"));
  }
  Handle ds(NOEIRA_H5_CHECK_INPUT(H5Dopen2(loc, name, H5P_DEFAULT), file), H5Dclose);
  Handle type(NOEIRA_H5_CHECK_INPUT(H5Dget_type(ds.get()), file), H5Tclose);
  Handle space(NOEIRA_H5_CHECK_INPUT(H5Dget_space(ds.get()), file), H5Sclose);
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) != 0 ||
      H5Sget_simple_extent_npoints(space.get()) != 1) {
    throw InputError(detail::concat(file.string(), ": dataset '", name,
                                    "' is not a fixed-length string"));
  }
  std::string value(H5Tget_size(type.get()), '\0');
  NOEIRA_H5_CHECK_INPUT(
      H5Dread(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, value.data()), file);
  return unpad(std::move(value));
}

bool path_exists(hid_t loc, std::string_view path, const std::filesystem::path& /*file*/) {
  Lock held = lock();
  std::size_t pos = 0;
  while (pos <= path.size()) {
    const std::size_t slash = std::min(path.find('/', pos), path.size());
    const std::string prefix(path.substr(0, slash));
    // A failure (an intermediate link that is not a group) also means "not there".
    if (prefix.empty() || H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    pos = slash + 1;
  }
  return true;
}

std::vector<std::string> dataset_paths(hid_t loc, const std::filesystem::path& file,
                                       std::span<const std::string_view> skip) {
  Lock held = lock();
  std::vector<std::string> links;
  NOEIRA_H5_CHECK_INPUT(H5Lvisit(loc, H5_INDEX_NAME, H5_ITER_INC, collect_link, &links), file);
  std::vector<std::string> datasets;
  for (const std::string& link : links) {
    const std::string_view first = std::string_view(link).substr(0, link.find('/'));
    if (std::find(skip.begin(), skip.end(), first) != skip.end()) continue;
    Handle obj(NOEIRA_H5_CHECK_INPUT(H5Oopen(loc, link.c_str(), H5P_DEFAULT), file), H5Oclose);
    if (H5Iget_type(obj.get()) == H5I_DATASET) datasets.push_back(link);
  }
  std::sort(datasets.begin(), datasets.end());
  return datasets;
}

}  // namespace noeira::io::h5
