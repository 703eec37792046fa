#pragma once
// The HDF5 wrapper of io/: one process-wide lock, one check macro, move-only handles, typed
// attribute helpers and open_dataset, the one checked way every reader opens a dataset (data
// stored in the file itself, of the expected type). Private to io/.
//
// Why a lock: Debian's HDF5 is the parallel (MPI) build, which is not built thread-safe; two
// threads inside the library at once corrupt its global state (identifier tables, metadata
// cache, free lists). The simulated backend runs N ranks as N threads of one process, each
// writing its own checkpoint file, so every HDF5 call in io/ runs under h5::lock(). The mutex is
// recursive so that helpers, and the handles' destructors (H5?close is an HDF5 call too), can
// take it again inside a caller's scope. Work that needs no HDF5 (checksums, the slices' raw
// bytes through pwrite/pread at H5Dget_offset, fsync) is done outside it, which is where N ranks
// of one process overlap.
#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace noeira::io::h5 {

using Lock = std::unique_lock<std::recursive_mutex>;

// Takes the process-wide HDF5 lock. The first call also switches off HDF5's automatic error
// stack printing: our errors are one line each, thrown by the checks below.
Lock lock();

// Which error a failed call throws: LibraryError for a call that should not fail on good input
// (creating, writing), InputError for a call that fails because the file is bad (truncated,
// corrupted, not ours).
enum class Fault : std::uint8_t { Library, Input };

[[noreturn]] void fail(Fault fault, const std::filesystem::path& file, const char* call,
                       const char* source, int line);

template <class T>
T check(T result, Fault fault, const std::filesystem::path& file, const char* call,
        const char* source, int line) {
  if (result < 0) fail(fault, file, call, source, line);
  return result;
}

}  // namespace noeira::io::h5

// A failed HDF5 call (negative id or status) throws LibraryError naming the call and the file.
#define NOEIRA_H5_CHECK(call, file)                                                          \
  ::noeira::io::h5::check((call), ::noeira::io::h5::Fault::Library, (file), #call, __FILE__, \
                          __LINE__)
// The same while reading a file we did not write in this process: a failure means a truncated
// or corrupted file, an InputError naming it.
#define NOEIRA_H5_CHECK_INPUT(call, file)                                                  \
  ::noeira::io::h5::check((call), ::noeira::io::h5::Fault::Input, (file), #call, __FILE__, \
                          __LINE__)

namespace noeira::io::h5 {

// Closes an HDF5 identifier of any kind on scope exit, under the lock.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const { return id_; }
  // Closes now; a failed close (HDF5 flushes metadata there) throws, unlike the destructor's.
  void close(const std::filesystem::path& file);
  void reset() noexcept;

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

// A file access property list without HDF5's file locks: checkpoint files are written once by
// one writer and read only after the commit, so the locks protect nothing here, while on NFS and
// Lustre (where flock often fails) they make every open fail.
Handle file_access(const std::filesystem::path& file);

// `file` opened read-only (without the locks, as file_access): a regular file first
// (io/file_kind.hpp: a missing file, a directory and a FIFO, which would block, are one line
// each), then an HDF5 one, else an InputError naming it. What every reader of a user's HDF5 file
// opens it with.
Handle open_for_reading(const std::filesystem::path& file);

// Attributes. `file` names the file in error messages; `where` names the object ("dataset
// 'params/0.weight/val'", "the root group").
void write_string_attr(hid_t obj, const char* name, std::string_view value,
                       const std::filesystem::path& file);
void write_i64_attr(hid_t obj, const char* name, std::int64_t value,
                    const std::filesystem::path& file);
void write_u32_attr(hid_t obj, const char* name, std::uint32_t value,
                    const std::filesystem::path& file);
void write_u64_attr(hid_t obj, const char* name, std::uint64_t value,
                    const std::filesystem::path& file);
void write_f64_attr(hid_t obj, const char* name, double value, const std::filesystem::path& file);
// A 1-D attribute; an empty vector gives a 1-D attribute of size 0.
void write_i64_array_attr(hid_t obj, const char* name, std::span<const std::int64_t> values,
                          const std::filesystem::path& file);
void write_u32_array_attr(hid_t obj, const char* name, std::span<const std::uint32_t> values,
                          const std::filesystem::path& file);

bool has_attr(hid_t obj, const char* name, const std::filesystem::path& file);
// Each reader throws InputError naming the file, the object and the attribute when it is missing
// or not exactly of the type the reader expects (int64, uint32, uint64, float64: little-endian, of
// that size and sign; no conversion from another type), or of the wrong shape (a scalar: one
// element; an array: 1-D).
//
// A string attribute is fixed-length, at most `max_size` bytes (checked before anything is read
// into memory), with no NUL byte inside: longer or variable-length ones are refused.
inline constexpr std::size_t kDefaultMaxString = 4096;
std::string read_string_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                             std::string_view where, std::size_t max_size = kDefaultMaxString);
std::int64_t read_i64_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                           std::string_view where);
std::uint32_t read_u32_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                            std::string_view where);
std::uint64_t read_u64_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                            std::string_view where);
double read_f64_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                     std::string_view where);
// 1-D arrays of at most `max_count` elements (checked before anything is allocated).
std::vector<std::int64_t> read_i64_array_attr(hid_t obj, const char* name,
                                              const std::filesystem::path& file,
                                              std::string_view where, std::size_t max_count);
std::vector<std::uint32_t> read_u32_array_attr(hid_t obj, const char* name,
                                               const std::filesystem::path& file,
                                               std::string_view where, std::size_t max_count);

// A name read from a file, quoted for a one-line message: 'params/0.weight/val', with every byte
// that is not printable ASCII written as \xNN.
std::string quote_name(std::string_view name);

// "int32 (big-endian)", "float64", "string": a stored type in words, for messages.
std::string type_name(hid_t type);

// Names of the attributes of an object, in name order.
std::vector<std::string> attr_names(hid_t obj, const std::filesystem::path& file);

// Reading a dataset: the one place that decides which datasets noeira reads at all.
//
// open_dataset opens the dataset at `path` below `loc` ("params/0.weight/val") only when it is a
// plain dataset stored in this file, and throws InputError naming the file and the dataset
// otherwise, before any of its data is read:
//   - every link on the path is a hard link (no soft link, no external link into another file,
//     no user-defined link) to a group, and the last to a dataset (not a group, not a named
//     datatype) that no other link names;
//   - the layout is contiguous or chunked: not compact, not virtual (a view of other datasets,
//     possibly in other files, which reads as fill values where a source is missing);
//   - no external storage (H5Pset_external: the bytes would come from another file);
//   - chunked data passes only through HDF5's built-in deflate, shuffle and fletcher32 filters (no
//     filter plugin is ever loaded);
//   - the storage is allocated and lies inside the file: every chunk written, or the contiguous
//     bytes before the end of the file (a dataset created but never written would read as its
//     fill value); the size it claims fits what the file can hold (a dataspace of 2^62 elements
//     in a file of kilobytes is refused before anything is sized by it);
//   - the element type is exactly `spec.type` (class, size, sign, byte order: an int32 or float64
//     dataset where float32 belongs is refused, not converted), or for spec.type < 0 a
//     fixed-length string of at most spec.max_string bytes, or with spec.any_number an integer or
//     float of up to 8 bytes in either byte order (a user's array, which the reader converts);
//   - the dataspace is simple (or scalar) of rank spec.rank when that is >= 0.
struct DatasetSpec {
  hid_t type = -1;                             // an HDF5 file type (H5T_IEEE_F32LE); -1: a string
  std::size_t max_string = kDefaultMaxString;  // strings only: the largest accepted size
  int rank = -1;                               // -1: any
  bool any_number = false;                     // any integer or float (type ignored)
};

struct Dataset {
  Handle handle;
  std::vector<std::int64_t> dims;  // empty for a scalar
  std::int64_t points = 0;         // elements
  std::size_t type_size = 0;       // bytes per element
  std::int64_t file_offset = -1;   // contiguous: where the bytes start in the file, else -1
  bool floats = false;             // the elements are floating point
};

Dataset open_dataset(hid_t loc, std::string_view path, const DatasetSpec& spec,
                     const std::filesystem::path& file);

// A scalar fixed-length string dataset (no 64 KiB attribute limit), and reading it back (through
// open_dataset: at most max_size bytes, no NUL inside).
void write_string_dataset(hid_t loc, const char* name, std::string_view value,
                          const std::filesystem::path& file);
std::string read_string_dataset(hid_t loc, const char* name, const std::filesystem::path& file,
                                std::size_t max_size);

// Whether a path of groups and a final link exists below loc ("a/b/c"), without failing on a
// missing intermediate group as H5Lexists does. A link on the way that is not a hard link (soft,
// external, user-defined) is an InputError naming it: it is never followed.
bool path_exists(hid_t loc, std::string_view path, const std::filesystem::path& file);

// Opens the group at `path` below loc: hard links only, a group at the end; InputError naming
// the file and the group otherwise (missing included).
Handle open_group(hid_t loc, std::string_view path, const std::filesystem::path& file);

// Paths (relative to loc, "/"-separated) of every dataset below loc, in name order, skipping the
// subtrees whose first component is in `skip`. Every link below loc (the skipped subtrees
// included) must be a hard link to a group or a dataset, each object named by one link only:
// anything else (a soft or external link, a named datatype, a second hard link to an object) is
// an InputError naming it.
std::vector<std::string> dataset_paths(hid_t loc, const std::filesystem::path& file,
                                       std::span<const std::string_view> skip);

}  // namespace noeira::io::h5
