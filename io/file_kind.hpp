#pragma once
// What kind of file a path is, checked before it is opened: opening a FIFO for reading blocks
// until a writer comes (forever, with no writer), and a device or socket streams without end.
// Every reader in io/ (IDX, CIFAR, text, parameters files, checkpoints and their `latest`) and the
// JSON config calls require_regular_file first.
#include <filesystem>
#include <string_view>

namespace noeira::io {

// The path's type, following symbolic links (a link to a file is that file); InputError naming
// the path when it cannot be examined.
std::filesystem::file_type file_type_of(const std::filesystem::path& path);

// InputError "<path>: is a FIFO, expected <expected>" (or a socket, a device, ...).
[[noreturn]] void refuse_file_kind(const std::filesystem::path& path,
                                   std::filesystem::file_type type, std::string_view expected);

// InputError unless the path is a regular file (or a link to one): "file not found", "is a
// directory, expected <expected>", "is a FIFO, expected <expected>".
void require_regular_file(const std::filesystem::path& path,
                          std::string_view expected = "a regular file");

}  // namespace noeira::io
