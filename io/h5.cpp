#include "io/h5.hpp"

#include <algorithm>
#include <cstdint>
#include <system_error>

#include "io/file_kind.hpp"
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

Handle open_for_reading(const std::filesystem::path& file) {
  require_regular_file(file, "an HDF5 file");
  Lock held = lock();
  if (H5Fis_hdf5(file.c_str()) <= 0) {
    throw InputError(detail::concat(file.string(), ": not an HDF5 file (truncated or corrupted)"));
  }
  const Handle fapl = file_access(file);
  return Handle(NOEIRA_H5_CHECK_INPUT(H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get()), file),
                H5Fclose);
}

std::string quote_name(std::string_view name) {
  std::string out = "'";
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out + "'";
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
      detail::concat(file.string(), ": ", where, ": attribute ", quote_name(name), " ", problem));
}


// A stored fixed-length string as the reader takes it: the padding removed, nothing inside that
// is not text (a NUL byte).
std::string checked_string(std::string s, const std::filesystem::path& file,
                           std::string_view what) {
  while (!s.empty() && s.back() == '\0') s.pop_back();
  if (s.find('\0') != std::string::npos) {
    throw InputError(detail::concat(file.string(), ": ", what, " holds a NUL byte"));
  }
  return s;
}

// Opens an attribute after checking its type and element count: `type` is the exact file type
// expected (H5T_STD_I64LE), or -1 for a fixed-length string (checked by the caller); count 1: a
// scalar (one element), count -1: a 1-D array of at most max_count elements.
Handle open_attr(hid_t obj, const char* name, hid_t type, hssize_t count,
                 const std::filesystem::path& file, std::string_view where,
                 hssize_t* count_out = nullptr, std::size_t max_count = 0) {
  if (!has_attr(obj, name, file)) attr_error(file, where, name, "is missing");
  Handle attr(NOEIRA_H5_CHECK_INPUT(H5Aopen(obj, name, H5P_DEFAULT), file), H5Aclose);
  Handle stored(NOEIRA_H5_CHECK_INPUT(H5Aget_type(attr.get()), file), H5Tclose);
  if (type < 0 ? H5Tget_class(stored.get()) != H5T_STRING
               : NOEIRA_H5_CHECK_INPUT(H5Tequal(stored.get(), type), file) <= 0) {
    attr_error(file, where, name,
               detail::concat("has the wrong type (", type_name(stored.get()), ", expected ",
                              type < 0 ? std::string("a fixed-length string") : type_name(type),
                              ")"));
  }
  Handle space(NOEIRA_H5_CHECK_INPUT(H5Aget_space(attr.get()), file), H5Sclose);
  const H5S_class_t space_class = H5Sget_simple_extent_type(space.get());
  const int ndims = NOEIRA_H5_CHECK_INPUT(H5Sget_simple_extent_ndims(space.get()), file);
  const hssize_t n = NOEIRA_H5_CHECK_INPUT(H5Sget_simple_extent_npoints(space.get()), file);
  if (space_class != H5S_SCALAR && space_class != H5S_SIMPLE) {
    attr_error(file, where, name, "has no elements (a null dataspace)");
  }
  if (count >= 0 ? n != count : ndims != 1) {
    attr_error(file, where, name,
               detail::concat("has the wrong number of elements (", n, ", expected ",
                              count >= 0 ? detail::concat(count) : std::string("a 1-D array"),
                              ")"));
  }
  if (count < 0 && static_cast<std::uint64_t>(n) > max_count) {
    attr_error(file, where, name,
               detail::concat("has ", n, " elements, more than the ", max_count, " it can have"));
  }
  if (count_out != nullptr) *count_out = n;
  return attr;
}

template <class T>
T read_scalar(hid_t obj, const char* name, hid_t file_type, hid_t mem_type,
              const std::filesystem::path& file, std::string_view where) {
  Lock held = lock();
  Handle attr = open_attr(obj, name, file_type, 1, file, where);
  T value{};
  NOEIRA_H5_CHECK_INPUT(H5Aread(attr.get(), mem_type, &value), file);
  return value;
}

template <class T>
std::vector<T> read_vector(hid_t obj, const char* name, hid_t file_type, hid_t mem_type,
                           const std::filesystem::path& file, std::string_view where,
                           std::size_t max_count) {
  Lock held = lock();
  hssize_t n = 0;
  Handle attr = open_attr(obj, name, file_type, -1, file, where, &n, max_count);
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

}  // namespace

std::string type_name(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const std::size_t bits = H5Tget_size(type) * 8;
  const char* order = H5Tget_order(type) == H5T_ORDER_BE ? " (big-endian)" : "";
  switch (cls) {
    case H5T_INTEGER:
      return detail::concat(H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int", bits, order);
    case H5T_FLOAT: return detail::concat("float", bits, order);
    case H5T_STRING:
      return H5Tis_variable_str(type) > 0 ? "a variable-length string" : "a fixed-length string";
    case H5T_COMPOUND: return "a compound type";
    case H5T_ENUM: return "an enum";
    case H5T_ARRAY: return "an array type";
    case H5T_VLEN: return "a variable-length sequence";
    case H5T_REFERENCE: return "a reference";
    case H5T_OPAQUE: return "an opaque type";
    case H5T_BITFIELD: return "a bitfield";
    case H5T_TIME: return "a time type";
    default: return "an unknown type";
  }
}

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
                             std::string_view where, std::size_t max_size) {
  Lock held = lock();
  Handle attr = open_attr(obj, name, -1, 1, file, where);
  Handle type(NOEIRA_H5_CHECK_INPUT(H5Aget_type(attr.get()), file), H5Tclose);
  if (H5Tis_variable_str(type.get()) != 0) {
    attr_error(file, where, name, "is not a fixed-length string");
  }
  const std::size_t size = H5Tget_size(type.get());
  if (size == 0 || size > max_size) {
    attr_error(file, where, name,
               detail::concat("is a string of ", size, " bytes, more than the ", max_size,
                              " it can have"));
  }
  std::string value(size, '\0');
  NOEIRA_H5_CHECK_INPUT(H5Aread(attr.get(), type.get(), value.data()), file);
  return checked_string(std::move(value), file,
                        detail::concat(where, ": attribute ", quote_name(name)));
}

std::int64_t read_i64_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                           std::string_view where) {
  return read_scalar<std::int64_t>(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, file, where);
}

std::uint32_t read_u32_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                            std::string_view where) {
  return read_scalar<std::uint32_t>(obj, name, H5T_STD_U32LE, H5T_NATIVE_UINT32, file, where);
}

std::uint64_t read_u64_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                            std::string_view where) {
  return read_scalar<std::uint64_t>(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, file, where);
}

double read_f64_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                     std::string_view where) {
  return read_scalar<double>(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, file, where);
}

std::vector<std::int64_t> read_i64_array_attr(hid_t obj, const char* name,
                                              const std::filesystem::path& file,
                                              std::string_view where, std::size_t max_count) {
  return read_vector<std::int64_t>(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, file, where,
                                   max_count);
}

std::vector<std::uint32_t> read_u32_array_attr(hid_t obj, const char* name,
                                               const std::filesystem::path& file,
                                               std::string_view where, std::size_t max_count) {
  return read_vector<std::uint32_t>(obj, name, H5T_STD_U32LE, H5T_NATIVE_UINT32, file, where,
                                    max_count);
}

namespace {

// HDF5 calls this from C: it must not throw, so it only collects names.
herr_t collect_attr(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
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

std::string read_string_dataset(hid_t loc, const char* name, const std::filesystem::path& file,
                                std::size_t max_size) {
  Lock held = lock();
  const Dataset ds = open_dataset(loc, name, DatasetSpec{-1, max_size, 0}, file);
  const Handle type(NOEIRA_H5_CHECK_INPUT(H5Dget_type(ds.handle.get()), file), H5Tclose);
  std::string value(ds.type_size, '\0');
  NOEIRA_H5_CHECK_INPUT(
      H5Dread(ds.handle.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, value.data()), file);
  return checked_string(std::move(value), file, detail::concat("dataset ", quote_name(name)));
}

}  // namespace noeira::io::h5
