#pragma once
// A file written whole or not at all: under a temporary name beside its final one (<name>.tmp, on
// the same file system, so that the rename is atomic), renamed over the final name when complete.
// The guard removes the temporary file unless it was moved into place, so that a write that fails
// halfway (a full disk, a refused value, an exception) leaves nothing where the user does not look.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "kernels/error.hpp"

namespace noeira::io {

class TemporaryFile {
 public:
  explicit TemporaryFile(const std::filesystem::path& final_path)
      : final_(final_path), path_(final_path) {
    path_ += ".tmp";
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (committed_) return;
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }

  const std::filesystem::path& path() const { return path_; }

  // The error when the temporary file cannot be created, naming the file the user asked for and
  // errno's reason (call it right after the failed open).
  InputError cannot_create() const {
    const int err = errno;
    return InputError(detail::concat(final_.string(), ": cannot create it (",
                                     err != 0 ? std::strerror(err) : "unknown reason", ")"));
  }

  // Moves the written file into place: an InputError naming the final path when it cannot.
  void commit() {
    std::error_code ec;
    std::filesystem::rename(path_, final_, ec);
    if (ec) {
      throw InputError(detail::concat(final_.string(),
                                      ": cannot move the written file into place (", ec.message(),
                                      ")"));
    }
    committed_ = true;
  }

 private:
  std::filesystem::path final_;
  std::filesystem::path path_;
  bool committed_ = false;
};

}  // namespace noeira::io
