#include <algorithm>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include "io/h5.hpp"
#include "kernels/error.hpp"

// open_dataset and the walks over a file's links: the one place that decides which datasets
// noeira reads at all (io/h5.hpp says what it refuses).
namespace noeira::io::h5 {

namespace {

constexpr const char* kOnlyThisFile = "noeira reads only data stored in the file itself";

// What a link that is not a hard link is, in words ("a soft link to '/x'", "an external link to
// 'other.h5:/x'"), for the refusal naming it.
std::string link_kind(hid_t loc, const char* name, const H5L_info_t& info) {
  const bool soft = info.type == H5L_TYPE_SOFT;
  const bool external = info.type == H5L_TYPE_EXTERNAL;
  if (!soft && !external) return "a user-defined link";
  std::string what = soft ? "a soft link" : "an external link";
  // The target, when it is short enough to quote (the value is never followed).
  const std::size_t size = info.u.val_size;
  if (size == 0 || size > 4096) return what;
  std::string value(size, '\0');
  if (H5Lget_val(loc, name, value.data(), size, H5P_DEFAULT) < 0) return what;
  if (soft) return what + " to " + quote_name(value.c_str());
  const char* target_file = nullptr;
  const char* target_obj = nullptr;
  if (H5Lunpack_elink_val(value.data(), size, nullptr, &target_file, &target_obj) < 0 ||
      target_file == nullptr || target_obj == nullptr) {
    return what;
  }
  return what + " to " + quote_name(std::string(target_file) + ":" + target_obj);
}

struct ObjectInfo {
  H5O_type_t type = H5O_TYPE_UNKNOWN;
  unsigned links = 0;  // hard links naming the object
};

// The object a hard link names, read without opening it.
ObjectInfo object_info(hid_t loc, const char* name, const std::filesystem::path& file) {
#if H5_VERSION_GE(1, 12, 0)
  H5O_info2_t info;
  NOEIRA_H5_CHECK_INPUT(H5Oget_info_by_name3(loc, name, &info, H5O_INFO_BASIC, H5P_DEFAULT),
                        file);
#else
  H5O_info_t info;
  NOEIRA_H5_CHECK_INPUT(H5Oget_info_by_name2(loc, name, &info, H5O_INFO_BASIC, H5P_DEFAULT),
                        file);
#endif
  return {info.type, info.rc};
}

const char* object_kind(H5O_type_t type) {
  switch (type) {
    case H5O_TYPE_GROUP: return "a group";
    case H5O_TYPE_DATASET: return "a dataset";
    case H5O_TYPE_NAMED_DATATYPE: return "a named datatype";
    default: return "an object of unknown kind";
  }
}

// Throws the refusal of a link that is not a hard link to an object of `want` kind named by no
// other link. `path` is the link's path below the reader's location and `full` the path the reader
// is after, for the message.
void check_link(hid_t loc, const char* name, std::string_view path, std::string_view full,
                H5O_type_t want, const std::filesystem::path& file) {
  H5L_info_t info;
  NOEIRA_H5_CHECK_INPUT(H5Lget_info(loc, name, &info, H5P_DEFAULT), file);
  const std::string at =
      path == full ? quote_name(path)
                   : detail::concat(quote_name(path), " (on the way to ", quote_name(full), ")");
  if (info.type != H5L_TYPE_HARD) {
    throw InputError(detail::concat(file.string(), ": ", at, " is ", link_kind(loc, name, info),
                                    ": ", kOnlyThisFile));
  }
  const ObjectInfo object = object_info(loc, name, file);
  if (object.type != want) {
    throw InputError(detail::concat(file.string(), ": ", at, " is ", object_kind(object.type),
                                    ", not ", object_kind(want)));
  }
  if (object.links != 1) {
    throw InputError(detail::concat(file.string(), ": ", at, " is ", object_kind(object.type),
                                    " that ", object.links,
                                    " links name (another name for the same object)"));
  }
}

// Walks `path` below loc one link at a time, each a hard link (checked before it is followed) to
// a group, the last one to an object of kind `want`, and opens that. Missing: InputError.
Handle open_object(hid_t loc, std::string_view path, H5O_type_t want, hid_t dapl,
                   const std::filesystem::path& file, std::string_view what) {
  if (path.empty()) {
    throw InputError(detail::concat(file.string(), ": ", what, " has an empty name"));
  }
  Handle current;
  hid_t at = loc;
  std::size_t pos = 0;
  while (true) {
    const std::size_t slash = std::min(path.find('/', pos), path.size());
    const std::string name(path.substr(pos, slash - pos));
    const std::string_view prefix = path.substr(0, slash);
    const bool last = slash == path.size();
    if (name.empty() || H5Lexists(at, name.c_str(), H5P_DEFAULT) <= 0) {
      throw InputError(detail::concat(file.string(), ": ", what, " is missing"));
    }
    check_link(at, name.c_str(), prefix, path, last ? want : H5O_TYPE_GROUP, file);
    Handle next = !last || want == H5O_TYPE_GROUP
                      ? Handle(NOEIRA_H5_CHECK_INPUT(H5Gopen2(at, name.c_str(), H5P_DEFAULT), file),
                               H5Gclose)
                      : Handle(NOEIRA_H5_CHECK_INPUT(H5Dopen2(at, name.c_str(), dapl), file),
                               H5Dclose);
    current = std::move(next);
    at = current.get();
    if (last) return current;
    pos = slash + 1;
  }
}

// Dataset access that could not reach another file even if a check below were missed: virtual
// sources and external raw data are looked up under a directory that does not exist.
Handle isolated_access(const std::filesystem::path& file) {
  static constexpr const char* kNowhere = "/nonexistent/noeira-reads-no-other-file/";
  Handle dapl(NOEIRA_H5_CHECK(H5Pcreate(H5P_DATASET_ACCESS), file), H5Pclose);
  NOEIRA_H5_CHECK(H5Pset_virtual_prefix(dapl.get(), kNowhere), file);
  NOEIRA_H5_CHECK(H5Pset_efile_prefix(dapl.get(), kNowhere), file);
  return dapl;
}

std::int64_t file_bytes(const std::filesystem::path& file) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) {
    throw InputError(detail::concat(file.string(), ": cannot read its size (", ec.message(), ")"));
  }
  return static_cast<std::int64_t>(size);
}

// a * b, or UINT64_MAX when that overflows.
std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > UINT64_MAX / a) return UINT64_MAX;
  return a * b;
}

struct LinkEntry {
  std::string name;
  H5L_type_t type;
};

// HDF5 calls these from C: they must not throw, so they only collect names.
herr_t collect_link(hid_t, const char* name, const H5L_info_t* info, void* out) {
  static_cast<std::vector<LinkEntry>*>(out)->push_back({name, info->type});
  return 0;
}
}  // namespace

Dataset open_dataset(hid_t loc, std::string_view path, const DatasetSpec& spec,
                     const std::filesystem::path& file) {
  Lock held = lock();
  const std::string what = detail::concat("dataset ", quote_name(path));
  const auto refuse = [&](std::string_view problem) {
    return InputError(detail::concat(file.string(), ": ", what, " ", problem));
  };
  const Handle dapl = isolated_access(file);
  Dataset out;
  out.handle = open_object(loc, path, H5O_TYPE_DATASET, dapl.get(), file, what);
  const hid_t ds = out.handle.get();

  // Where the bytes are: in this file, contiguous or in chunks, nowhere else.
  const Handle dcpl(NOEIRA_H5_CHECK_INPUT(H5Dget_create_plist(ds), file), H5Pclose);
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout == H5D_VIRTUAL) {
    std::size_t sources = 0;
    NOEIRA_H5_CHECK_INPUT(H5Pget_virtual_count(dcpl.get(), &sources), file);
    std::string first;
    if (sources > 0) {
      const ssize_t n = H5Pget_virtual_filename(dcpl.get(), 0, nullptr, 0);
      if (n > 0 && n <= 4096) {
        std::string name(static_cast<std::size_t>(n) + 1, '\0');
        H5Pget_virtual_filename(dcpl.get(), 0, name.data(), name.size());
        first = detail::concat(", the first in file ", quote_name(name.c_str()));
      }
    }
    throw refuse(detail::concat("is a virtual dataset (a view of ", sources,
                                " source dataset(s)", first, "): ", kOnlyThisFile));
  }
  if (layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED) {
    throw refuse(layout == H5D_COMPACT
                     ? "has the compact layout: noeira reads contiguous or chunked datasets"
                     : "has an unknown storage layout");
  }
  const int externals = NOEIRA_H5_CHECK_INPUT(H5Pget_external_count(dcpl.get()), file);
  if (externals != 0) {
    std::string name(4097, '\0');
    off_t offset = 0;
    hsize_t size = 0;
    std::string where;
    if (H5Pget_external(dcpl.get(), 0, name.size(), name.data(), &offset, &size) >= 0) {
      where = detail::concat(" (the first: ", quote_name(name.c_str()), ")");
    }
    throw refuse(detail::concat("has its data in ", externals, " external file(s)", where,
                                ": ", kOnlyThisFile));
  }
  const int filters = NOEIRA_H5_CHECK_INPUT(H5Pget_nfilters(dcpl.get()), file);
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0;
    std::size_t cd_count = 0;
    unsigned config = 0;
    const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags,
                                           &cd_count, nullptr, 0, nullptr, &config);
    if (id != H5Z_FILTER_DEFLATE && id != H5Z_FILTER_SHUFFLE && id != H5Z_FILTER_FLETCHER32) {
      throw refuse(detail::concat("passes through filter ", id,
                                  ": noeira reads data filtered by deflate, shuffle and "
                                  "fletcher32 only"));
    }
  }

  // The element type, exactly.
  const Handle type(NOEIRA_H5_CHECK_INPUT(H5Dget_type(ds), file), H5Tclose);
  out.type_size = H5Tget_size(type.get());
  const H5T_class_t type_class = H5Tget_class(type.get());
  out.floats = type_class == H5T_FLOAT;
  if (spec.any_number) {
    if ((type_class != H5T_INTEGER && type_class != H5T_FLOAT) || out.type_size > 8) {
      throw refuse(detail::concat("holds ", type_name(type.get()),
                                  ", expected integers or floats of up to 64 bits"));
    }
  } else if (spec.type >= 0) {
    if (NOEIRA_H5_CHECK_INPUT(H5Tequal(type.get(), spec.type), file) <= 0) {
      throw refuse(detail::concat("holds ", type_name(type.get()), " elements, expected ",
                                  type_name(spec.type)));
    }
  } else if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) != 0) {
    throw refuse(detail::concat("holds ", type_name(type.get()),
                                ", expected a fixed-length string"));
  } else if (out.type_size == 0 || out.type_size > spec.max_string) {
    throw refuse(detail::concat("is a string of ", out.type_size, " bytes, more than the ",
                                spec.max_string, " it can have"));
  }

  // The shape.
  const Handle space(NOEIRA_H5_CHECK_INPUT(H5Dget_space(ds), file), H5Sclose);
  const H5S_class_t space_class = H5Sget_simple_extent_type(space.get());
  if (space_class != H5S_SIMPLE && space_class != H5S_SCALAR) {
    throw refuse("has no dataspace (a null dataspace holds no elements)");
  }
  const int rank = NOEIRA_H5_CHECK_INPUT(H5Sget_simple_extent_ndims(space.get()), file);
  if (spec.rank >= 0 && rank != spec.rank) {
    throw refuse(detail::concat("has ", rank, " dimension(s), expected ", spec.rank));
  }
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  NOEIRA_H5_CHECK_INPUT(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), file);
  std::uint64_t points = 1;
  for (const hsize_t d : dims) {
    points = saturating_mul(points, d);
    out.dims.push_back(static_cast<std::int64_t>(std::min<hsize_t>(d, INT64_MAX)));
  }
  const std::int64_t size = file_bytes(file);
  // No dataset holds more bytes than its file (filters may shrink data, by less than 1:1100).
  if (saturating_mul(points, out.type_size) / 1100 > static_cast<std::uint64_t>(size)) {
    throw refuse(detail::concat("claims ", points, " elements of ", out.type_size,
                                " bytes, more than its file of ", size, " bytes can hold"));
  }
  out.points = static_cast<std::int64_t>(points);
  if (points == 0) return out;  // no storage to check

  // The storage: allocated (written), inside the file.
  const std::uint64_t bytes = points * out.type_size;
  if (layout == H5D_CONTIGUOUS) {
    H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
    NOEIRA_H5_CHECK_INPUT(H5Dget_space_status(ds, &status), file);
    const haddr_t addr = H5Dget_offset(ds);
    if (status != H5D_SPACE_STATUS_ALLOCATED || addr == HADDR_UNDEF) {
      throw refuse("was never written (no storage allocated: it would read as fill values)");
    }
    const Handle file_id(NOEIRA_H5_CHECK_INPUT(H5Iget_file_id(ds), file), H5Fclose);
    const Handle fcpl(NOEIRA_H5_CHECK_INPUT(H5Fget_create_plist(file_id.get()), file), H5Pclose);
    hsize_t userblock = 0;
    NOEIRA_H5_CHECK_INPUT(H5Pget_userblock(fcpl.get(), &userblock), file);
    // Addresses count from the end of the user block.
    const std::uint64_t begin = addr + userblock;
    if (begin < addr || begin > static_cast<std::uint64_t>(size) ||
        bytes > static_cast<std::uint64_t>(size) - begin) {
      throw refuse(detail::concat("has its ", bytes, " bytes at offset ", begin,
                                  ", past the end of the file (", size,
                                  " bytes): truncated or corrupted"));
    }
    out.file_offset = static_cast<std::int64_t>(begin);
  } else {
    std::vector<hsize_t> chunk(static_cast<std::size_t>(rank));
    if (rank == 0 ||
        NOEIRA_H5_CHECK_INPUT(H5Pget_chunk(dcpl.get(), rank, chunk.data()), file) != rank) {
      throw refuse("is chunked with chunks of another rank than its own");
    }
    std::uint64_t expected = 1;
    for (std::size_t i = 0; i < chunk.size(); ++i) {
      if (chunk[i] == 0) throw refuse("has chunks of size 0");
      expected = saturating_mul(expected, (dims[i] + chunk[i] - 1) / chunk[i]);
    }
    hsize_t written = 0;
    NOEIRA_H5_CHECK_INPUT(H5Dget_num_chunks(ds, space.get(), &written), file);
    if (written != expected) {
      throw refuse(detail::concat("has ", written, " of its ", expected,
                                  " chunks written (the rest would read as fill values)"));
    }
    if (H5Dget_storage_size(ds) > static_cast<hsize_t>(size)) {
      throw refuse("has chunks that end past the end of the file: truncated or corrupted");
    }
  }
  return out;
}

bool path_exists(hid_t loc, std::string_view path, const std::filesystem::path& file) {
  Lock held = lock();
  std::size_t pos = 0;
  while (pos <= path.size()) {
    const std::size_t slash = std::min(path.find('/', pos), path.size());
    const std::string prefix(path.substr(0, slash));
    // A failure (an intermediate link that is not a group) also means "not there".
    if (prefix.empty() || H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    // Never followed further unless it is a hard link: H5Lexists of the next prefix would
    // resolve this one (an external link opens another file).
    H5L_info_t info;
    NOEIRA_H5_CHECK_INPUT(H5Lget_info(loc, prefix.c_str(), &info, H5P_DEFAULT), file);
    if (info.type != H5L_TYPE_HARD) {
      throw InputError(detail::concat(file.string(), ": ", quote_name(prefix), " is ",
                                      link_kind(loc, prefix.c_str(), info), ": ",
                                      kOnlyThisFile));
    }
    pos = slash + 1;
  }
  return true;
}

Handle open_group(hid_t loc, std::string_view path, const std::filesystem::path& file) {
  Lock held = lock();
  return open_object(loc, path, H5O_TYPE_GROUP, H5P_DEFAULT, file,
                     detail::concat("group ", quote_name(path)));
}

std::vector<std::string> dataset_paths(hid_t loc, const std::filesystem::path& file,
                                       std::span<const std::string_view> skip) {
  Lock held = lock();
  std::vector<LinkEntry> links;
  NOEIRA_H5_CHECK_INPUT(H5Lvisit(loc, H5_INDEX_NAME, H5_ITER_INC, collect_link, &links), file);
  std::vector<std::string> datasets;
  for (const LinkEntry& link : links) {
    // H5Lvisit descends through hard links only, so everything before the last '/' is checked.
    const std::size_t slash = link.name.rfind('/');
    const std::string parent = slash == std::string::npos ? "." : link.name.substr(0, slash);
    const std::string leaf = link.name.substr(slash + 1);
    const Handle group(NOEIRA_H5_CHECK_INPUT(H5Gopen2(loc, parent.c_str(), H5P_DEFAULT), file),
                       H5Gclose);
    H5L_info_t info;
    NOEIRA_H5_CHECK_INPUT(H5Lget_info(group.get(), leaf.c_str(), &info, H5P_DEFAULT), file);
    if (info.type != H5L_TYPE_HARD) {
      throw InputError(detail::concat(file.string(), ": ", quote_name(link.name), " is ",
                                      link_kind(group.get(), leaf.c_str(), info), ": ",
                                      kOnlyThisFile));
    }
    const ObjectInfo object = object_info(group.get(), leaf.c_str(), file);
    if (object.type != H5O_TYPE_GROUP && object.type != H5O_TYPE_DATASET) {
      throw InputError(detail::concat(file.string(), ": ", quote_name(link.name), " is ",
                                      object_kind(object.type), ", not a group or a dataset"));
    }
    if (object.links != 1) {
      throw InputError(detail::concat(file.string(), ": ", quote_name(link.name), " is ",
                                      object_kind(object.type), " that ", object.links,
                                      " links name (another name for the same object)"));
    }
    const std::string_view first = std::string_view(link.name).substr(0, link.name.find('/'));
    if (std::find(skip.begin(), skip.end(), first) != skip.end()) continue;
    if (object.type == H5O_TYPE_DATASET) datasets.push_back(link.name);
  }
  std::sort(datasets.begin(), datasets.end());
  return datasets;
}

}  // namespace noeira::io::h5
