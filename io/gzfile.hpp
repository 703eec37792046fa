#pragma once
// A gzip-or-plain input file read through zlib, with exact-count reads: the readers in io/ call
// read_exact and get an InputError naming the file and what it was reading when the data ends
// early. Private to io/.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace noeira::io {

class GzFile {
 public:
  // Throws InputError "<file>: cannot open (...)" when the file is missing or unreadable.
  explicit GzFile(const std::filesystem::path& file);
  ~GzFile();
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Reads exactly `bytes` bytes; `what` names the part being read in the error message.
  void read_exact(void* dst, std::size_t bytes, std::string_view what);
  std::uint32_t read_be32(std::string_view what);
  // Reads up to `bytes` bytes; 0 means the end of the data. A corrupt stream throws.
  std::size_t read_some(void* dst, std::size_t bytes);
  // Throws when any byte is left: a file longer than its header says is not the file we expect.
  void expect_end();

  // The most bytes the file can yield: its size when plain, deflate's 1032:1 limit times its
  // size when gzip. A header that claims more is a lie, refused before anything is allocated.
  std::int64_t max_data_bytes() const { return max_data_bytes_; }

  // How many bytes the file yields, as far as it tells before being read: a plain file's size;
  // for gzip, the trailer's ISIZE (the last member's size mod 2^32): never more than the file
  // yields, so a larger claim than a reader allows is refused up front. 0 when unknown.
  std::uint64_t size_hint() const;
  bool compressed() const { return !plain_; }

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::int64_t max_data_bytes_ = 0;
  std::uint64_t file_bytes_ = 0;
  bool plain_ = true;
  void* handle_ = nullptr;  // gzFile
};

}  // namespace noeira::io
