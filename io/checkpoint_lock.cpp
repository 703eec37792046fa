#include "io/checkpoint_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>
#include <system_error>

#include "kernels/error.hpp"

namespace noeira::io {

namespace {

// The holder's line is short; a longer file is not ours to quote in full.
constexpr std::size_t kMaxHolderBytes = 200;

[[noreturn]] void refuse(std::string_view flag, const std::filesystem::path& dir,
                         std::string_view why, int err = 0) {
  throw InputError(detail::concat(flag, " ", dir.string(), ": ", why,
                                  err != 0 ? " (" : "", err != 0 ? std::strerror(err) : "",
                                  err != 0 ? ")" : ""));
}

std::string holder_line() {
  char host[256] = "?";
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return detail::concat("host ", host, ", pid ", ::getpid(), ", started ", stamp, "\n");
}

// What the holder wrote, as one printable line (it may be mid-write: then it is empty).
std::string read_holder(int fd) {
  char buf[kMaxHolderBytes];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  std::string s;
  for (ssize_t i = 0; i < n && buf[i] != '\n'; ++i) {
    const auto c = static_cast<unsigned char>(buf[i]);
    s += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  return s.empty() ? std::string("holder unknown") : s;
}

}  // namespace

CheckpointDirLock CheckpointDirLock::acquire(const std::filesystem::path& ckpt_dir,
                                             std::string_view flag) {
  std::error_code ec;
  const auto status = std::filesystem::status(ckpt_dir, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_directory(status)) {
    refuse(flag, ckpt_dir, "exists and is not a directory");
  }
  std::filesystem::create_directories(ckpt_dir, ec);
  if (ec) refuse(flag, ckpt_dir, "cannot create the directory", ec.value());
  const std::filesystem::path file = ckpt_dir / kCheckpointLockFile;
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) refuse(flag, ckpt_dir, "cannot write in it", errno);
  CheckpointDirLock lock(fd);
  int rc = 0;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    // Some cluster file systems (Lustre mounted without -o flock) have no flock at all: refusing
    // would forbid checkpoints there, so the run goes on unlocked and says so (held()).
    if (errno == ENOSYS || errno == EOPNOTSUPP || errno == ENOLCK) {
      lock.held_ = false;
    } else if (errno != EWOULDBLOCK) {
      refuse(flag, ckpt_dir, "cannot lock it", errno);
    } else {
      refuse(flag, ckpt_dir, detail::concat("in use by another run (", read_holder(fd),
                                      "); wait for it to end, or choose another directory"));
    }
  }
  const std::string line = holder_line();
  if (::ftruncate(fd, 0) != 0) refuse(flag, ckpt_dir, "cannot write in it", errno);
  // A line this short is written whole or not at all (a short write is a full disk).
  const ssize_t n = ::pwrite(fd, line.data(), line.size(), 0);
  if (n != static_cast<ssize_t>(line.size())) {
    refuse(flag, ckpt_dir, "cannot write in it", n < 0 ? errno : ENOSPC);
  }
  if (::fsync(fd) != 0) refuse(flag, ckpt_dir, "cannot write in it", errno);
  return lock;
}

CheckpointDirLock::~CheckpointDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace noeira::io
