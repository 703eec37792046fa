#pragma once
// The POSIX file-system steps of the checkpoint protocol: fsync of files and directories, atomic
// renames, a small file replaced durably. Private to io/. Failures throw InputError naming the
// path and errno's text (an unwritable directory or a full disk is the user's to fix).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

namespace noeira::io::ckpt {

// A POSIX file descriptor, closed on scope exit.
class Fd {
 public:
  // Throws InputError naming the path when open(2) fails.
  Fd(const std::filesystem::path& path, int flags, int mode = 0644);
  ~Fd();
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&&) = delete;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// Writes all `bytes` at `offset` (retrying short writes and EINTR); InputError naming the path.
void pwrite_all(const Fd& fd, const void* data, std::size_t bytes, std::int64_t offset,
                const std::filesystem::path& path);
// Reads all `bytes` at `offset`; false when the file ends first, InputError on an I/O error.
bool pread_all(const Fd& fd, void* data, std::size_t bytes, std::int64_t offset,
               const std::filesystem::path& path);
// fsync(2) of an open file.
void fsync_fd(const Fd& fd, const std::filesystem::path& path);
// The file's size in bytes.
std::int64_t file_size(const Fd& fd, const std::filesystem::path& path);

// Flushes a file's data and metadata to the device.
void fsync_file(const std::filesystem::path& file);
// Flushes a directory, which makes the creations, renames and removals inside it durable.
void fsync_dir(const std::filesystem::path& dir);
// rename(2) from -> to. When `to` is an existing directory, the two are exchanged atomically
// (renameat2 RENAME_EXCHANGE) and the old one, now at `from`, is removed: `to` never stops
// existing, so a `latest` naming it never dangles.
void rename_replacing(const std::filesystem::path& from, const std::filesystem::path& to);
// Replaces `file` with `content` so that a crash leaves either the old or the new content:
// writes <file>.tmp, fsyncs it, calls before_rename (a test hook), renames it over `file`, fsyncs
// the directory.
void replace_file_durably(const std::filesystem::path& file, std::string_view content,
                          void (*before_rename)() = nullptr);
// remove_all that throws InputError naming the path.
void remove_tree(const std::filesystem::path& path);

}  // namespace noeira::io::ckpt
