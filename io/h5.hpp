#pragma once
// The HDF5 wrapper of io/: one process-wide lock, one check macro, move-only handles and typed
// attribute helpers. Private to io/.
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
// or of another kind (a string where a number belongs, an array where a scalar belongs).
std::string read_string_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                             std::string_view where);
std::int64_t read_i64_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                           std::string_view where);
std::uint32_t read_u32_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                            std::string_view where);
std::uint64_t read_u64_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                            std::string_view where);
double read_f64_attr(hid_t obj, const char* name, const std::filesystem::path& file,
                     std::string_view where);
std::vector<std::int64_t> read_i64_array_attr(hid_t obj, const char* name,
                                              const std::filesystem::path& file,
                                              std::string_view where);
std::vector<std::uint32_t> read_u32_array_attr(hid_t obj, const char* name,
                                               const std::filesystem::path& file,
                                               std::string_view where);

// Names of the attributes of an object, in name order.
std::vector<std::string> attr_names(hid_t obj, const std::filesystem::path& file);

// A scalar fixed-length string dataset (no 64 KiB attribute limit), and reading it back.
void write_string_dataset(hid_t loc, const char* name, std::string_view value,
                          const std::filesystem::path& file);
std::string read_string_dataset(hid_t loc, const char* name, const std::filesystem::path& file);

// Whether a path of groups and a final link exists below loc ("a/b/c"), without failing on a
// missing intermediate group as H5Lexists does.
bool path_exists(hid_t loc, std::string_view path, const std::filesystem::path& file);

// Paths (relative to loc, "/"-separated) of every dataset below loc, in name order, skipping the
// subtrees whose first component is in `skip`.
std::vector<std::string> dataset_paths(hid_t loc, const std::filesystem::path& file,
                                       std::span<const std::string_view> skip);

}  // namespace noeira::io::h5
