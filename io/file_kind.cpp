#include "io/file_kind.hpp"

#include "kernels/error.hpp"

namespace noeira::io {

namespace fs = std::filesystem;

fs::file_type file_type_of(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec && status.type() != fs::file_type::not_found) {
    throw InputError(detail::concat(path.string(), ": cannot read (", ec.message(), ")"));
  }
  return status.type();
}

void refuse_file_kind(const fs::path& path, fs::file_type type, std::string_view expected) {
  if (type == fs::file_type::not_found) {
    throw InputError(detail::concat(path.string(), ": file not found"));
  }
  const char* kind = type == fs::file_type::directory   ? "a directory"
                     : type == fs::file_type::fifo      ? "a FIFO"
                     : type == fs::file_type::socket    ? "a socket"
                     : type == fs::file_type::block     ? "a block device"
                     : type == fs::file_type::character ? "a character device"
                                                        : "not a regular file";
  throw InputError(detail::concat(path.string(), ": is ", kind, ", expected ", expected));
}

void require_regular_file(const fs::path& path, std::string_view expected) {
  const fs::file_type type = file_type_of(path);
  if (type != fs::file_type::regular) refuse_file_kind(path, type, expected);
}

}  // namespace noeira::io
