#include "io/checkpoint_fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "kernels/error.hpp"

namespace noeira::io::ckpt {

namespace {

[[noreturn]] void fs_error(const std::filesystem::path& path, std::string_view what, int err) {
  throw InputError(detail::concat(path.string(), ": cannot ", what, " (", std::strerror(err), ")"));
}

void fsync_path(const std::filesystem::path& path, int flags, std::string_view what) {
  const Fd fd(path, flags);
  if (::fsync(fd.get()) != 0) fs_error(path, what, errno);
}

}  // namespace

Fd::Fd(const std::filesystem::path& path, int flags, int mode)
    : fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {
  if (fd_ < 0) fs_error(path, "open", errno);
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

void pwrite_all(const Fd& fd, const void* data, std::size_t bytes, std::int64_t offset,
                const std::filesystem::path& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd.get(), p, bytes, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fs_error(path, "write", errno);
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += n;
  }
}

bool pread_all(const Fd& fd, void* data, std::size_t bytes, std::int64_t offset,
               const std::filesystem::path& path) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd.get(), p, bytes, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fs_error(path, "read", errno);
    if (n == 0) return false;
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += n;
  }
  return true;
}

void fsync_fd(const Fd& fd, const std::filesystem::path& path) {
  if (::fsync(fd.get()) != 0) fs_error(path, "fsync", errno);
}

std::int64_t file_size(const Fd& fd, const std::filesystem::path& path) {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fs_error(path, "stat", errno);
  return static_cast<std::int64_t>(st.st_size);
}

void fsync_file(const std::filesystem::path& file) { fsync_path(file, O_RDONLY, "fsync"); }

void fsync_dir(const std::filesystem::path& dir) {
  fsync_path(dir, O_RDONLY | O_DIRECTORY, "fsync the directory");
}

void rename_replacing(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::error_code ec;
  if (std::filesystem::is_directory(to, ec)) {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) != 0) {
      fs_error(from, detail::concat("exchange with ", to.string()), errno);
    }
    remove_tree(from);
    return;
  }
  if (::rename(from.c_str(), to.c_str()) != 0) {
    fs_error(from, detail::concat("rename to ", to.string()), errno);
  }
}

void replace_file_durably(const std::filesystem::path& file, std::string_view content,
                          void (*before_rename)()) {
  std::filesystem::path tmp = file;
  tmp += ".tmp";
  {
    const Fd fd(tmp, O_WRONLY | O_CREAT | O_TRUNC);
    pwrite_all(fd, content.data(), content.size(), 0, tmp);
    fsync_fd(fd, tmp);
  }
  if (before_rename != nullptr) before_rename();
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    fs_error(tmp, detail::concat("rename to ", file.string()), errno);
  }
  fsync_dir(file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path());
}

void remove_tree(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) fs_error(path, "remove", ec.value());
}

}  // namespace noeira::io::ckpt
