#include "io/gzfile.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "io/file_kind.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

namespace {
gzFile as_gz(void* h) { return static_cast<gzFile>(h); }
}  // namespace

GzFile::GzFile(const std::filesystem::path& file) : path_(file) {
  // gzopen would open a directory and fail later with a vaguer message, and block on a FIFO.
  require_regular_file(file);
  std::error_code ec;
  handle_ = gzopen(file.c_str(), "rb");
  if (handle_ == nullptr) {
    throw InputError(detail::concat(file.string(), ": cannot open (", std::strerror(errno), ")"));
  }
  gzbuffer(as_gz(handle_), 1 << 17);
  const auto size = static_cast<std::int64_t>(std::filesystem::file_size(file, ec));
  // Deflate emits at least one bit per 258-byte match: no stream expands more than 1032 times.
  constexpr std::int64_t kDeflateMaxRatio = 1032;
  plain_ = gzdirect(as_gz(handle_)) == 1;
  file_bytes_ = ec ? 0 : static_cast<std::uint64_t>(size);
  max_data_bytes_ = ec ? 0 : plain_ ? size : size * kDeflateMaxRatio;
}

std::uint64_t GzFile::size_hint() const {
  if (plain_) return file_bytes_;
  // A gzip member ends with CRC32 and ISIZE, 4 bytes each, little-endian.
  if (file_bytes_ < 18) return 0;
  std::ifstream in(path_, std::ios::binary);
  unsigned char b[4] = {};
  in.seekg(static_cast<std::streamoff>(file_bytes_ - 4));
  in.read(reinterpret_cast<char*>(b), 4);
  if (!in) return 0;
  return std::uint64_t{b[0]} | (std::uint64_t{b[1]} << 8) | (std::uint64_t{b[2]} << 16) |
         (std::uint64_t{b[3]} << 24);
}

GzFile::~GzFile() {
  if (handle_ != nullptr) gzclose(as_gz(handle_));
}

void GzFile::read_exact(void* dst, std::size_t bytes, std::string_view what) {
  auto* out = static_cast<unsigned char*>(dst);
  std::size_t done = 0;
  while (done < bytes) {
    // gzread takes an unsigned count; read in chunks well below its limit.
    const std::size_t want = std::min<std::size_t>(bytes - done, std::size_t{1} << 30);
    const int got = gzread(as_gz(handle_), out + done, static_cast<unsigned>(want));
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(as_gz(handle_), &code);
      throw InputError(detail::concat(path_.string(), ": corrupt or unreadable while reading ",
                                      what, " (", msg != nullptr ? msg : "zlib error", ")"));
    }
    if (got == 0) {
      throw InputError(detail::concat(path_.string(), ": truncated: expected ", bytes,
                                      " bytes of ", what, ", got ", done));
    }
    done += static_cast<std::size_t>(got);
  }
}

std::uint32_t GzFile::read_be32(std::string_view what) {
  unsigned char b[4];
  read_exact(b, 4, what);
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
         std::uint32_t{b[3]};
}

std::size_t GzFile::read_some(void* dst, std::size_t bytes) {
  const std::size_t want = std::min<std::size_t>(bytes, std::size_t{1} << 30);
  const int got = gzread(as_gz(handle_), dst, static_cast<unsigned>(want));
  if (got < 0) {
    int code = 0;
    const char* msg = gzerror(as_gz(handle_), &code);
    throw InputError(detail::concat(path_.string(), ": corrupt or unreadable (",
                                    msg != nullptr ? msg : "zlib error", ")"));
  }
  if (got == 0) {
    // A gzip stream cut short reads as a clean end unless the error state is asked.
    int code = 0;
    gzerror(as_gz(handle_), &code);
    if (code == Z_BUF_ERROR) {
      throw InputError(detail::concat(path_.string(), ": truncated (the gzip stream ends early)"));
    }
  }
  return static_cast<std::size_t>(got);
}

void GzFile::expect_end() {
  unsigned char extra = 0;
  const int got = gzread(as_gz(handle_), &extra, 1);
  if (got > 0) {
    throw InputError(detail::concat(path_.string(),
                                    ": has data past the end its header describes"));
  }
  if (got < 0) {
    int code = 0;
    const char* msg = gzerror(as_gz(handle_), &code);
    throw InputError(detail::concat(path_.string(), ": corrupt at the end of the data (",
                                    msg != nullptr ? msg : "zlib error", ")"));
  }
}

}  // namespace noeira::io
