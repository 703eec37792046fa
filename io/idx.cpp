#include "io/idx.hpp"

#include <iomanip>
#include <optional>
#include <sstream>

#include "io/gzfile.hpp"
#include "kernels/error.hpp"
#include "kernels/size_math.hpp"

namespace noeira::io {

namespace {

std::string hex32(std::uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(8) << std::setfill('0') << v;
  return os.str();
}

void check_magic(const GzFile& f, std::uint32_t magic, std::uint32_t expected, const char* kind) {
  if (magic != expected) {
    throw InputError(detail::concat(f.path().string(), ": not an IDX ", kind, " file: magic ",
                                    hex32(magic), ", expected ", hex32(expected)));
  }
}

// A dimension that would make the data absurdly large is a corrupt header, not a request to
// allocate terabytes.
std::int64_t check_dim(const GzFile& f, std::uint32_t d, const char* name) {
  constexpr std::uint32_t kMaxDim = 1u << 28;
  if (d == 0 || d > kMaxDim) {
    throw InputError(detail::concat(f.path().string(), ": implausible ", name, " ", d,
                                    " in the IDX header (corrupt file?)"));
  }
  return static_cast<std::int64_t>(d);
}

constexpr std::int64_t kImagesHeaderBytes = 16;  // magic and three dimensions
constexpr std::int64_t kLabelsHeaderBytes = 8;   // magic and one dimension

// The data size a header claims, checked against what the file can hold before it is allocated:
// a 33-byte file claiming 2^34 pixels is refused at once, not after a 16 GiB allocation per rank.
std::int64_t check_fits(const GzFile& f, std::optional<std::int64_t> bytes,
                        std::int64_t header_bytes, const std::string& what) {
  if (!bytes || *bytes > f.max_data_bytes() - header_bytes) {
    std::error_code ec;
    throw InputError(detail::concat(f.path().string(), ": truncated or corrupt: the header claims ",
                                    what, ", more than a file of ",
                                    std::filesystem::file_size(f.path(), ec), " bytes can hold"));
  }
  return *bytes;
}

}  // namespace

IdxImages read_idx_images(const std::filesystem::path& file) {
  GzFile f(file);
  check_magic(f, f.read_be32("the magic number"), kIdxImagesMagic, "images");
  IdxImages out;
  out.count = check_dim(f, f.read_be32("the image count"), "image count");
  out.rows = check_dim(f, f.read_be32("the row count"), "row count");
  out.cols = check_dim(f, f.read_be32("the column count"), "column count");
  const std::int64_t total = check_fits(
      f, size_product({out.count, out.rows, out.cols}), kImagesHeaderBytes,
      detail::concat(out.count, " images of ", out.rows, "x", out.cols));
  out.pixels.resize(static_cast<std::size_t>(total));
  f.read_exact(out.pixels.data(), out.pixels.size(),
               detail::concat(out.count, " images of ", out.rows, "x", out.cols));
  f.expect_end();
  return out;
}

std::vector<std::uint8_t> read_idx_labels(const std::filesystem::path& file, int num_classes) {
  GzFile f(file);
  check_magic(f, f.read_be32("the magic number"), kIdxLabelsMagic, "labels");
  const std::int64_t claimed = check_dim(f, f.read_be32("the label count"), "label count");
  const std::int64_t count =
      check_fits(f, claimed, kLabelsHeaderBytes, detail::concat(claimed, " labels"));
  std::vector<std::uint8_t> labels(static_cast<std::size_t>(count));
  f.read_exact(labels.data(), labels.size(), detail::concat(count, " labels"));
  f.expect_end();
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= num_classes) {
      throw InputError(detail::concat(file.string(), ": label ", int{labels[i]}, " at index ", i,
                                      " is outside 0..", num_classes - 1));
    }
  }
  return labels;
}

std::filesystem::path find_idx_file(const std::filesystem::path& dir, const std::string& stem) {
  std::error_code ec;
  const std::filesystem::path gz = dir / (stem + ".gz");
  if (std::filesystem::exists(gz, ec)) return gz;
  const std::filesystem::path plain = dir / stem;
  if (std::filesystem::exists(plain, ec)) return plain;
  throw InputError(detail::concat(gz.string(), ": file not found (nor ", plain.string(), ")"));
}

}  // namespace noeira::io
