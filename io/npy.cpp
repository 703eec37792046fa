#include "io/npy.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "io/file_kind.hpp"
#include "io/half.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
// NumPy writes headers of a few hundred bytes; a bound keeps a hostile length from allocating.
constexpr std::uint32_t kMaxHeaderBytes = 1 << 20;
constexpr std::size_t kMaxDims = 32;  // NumPy's own limit

[[noreturn]] void fail(const std::filesystem::path& file, std::string_view what) {
  throw InputError(detail::concat(file.string(), ": ", what));
}

struct TypeEntry {
  char kind;  // NumPy's kind character: f, i, u, b
  std::size_t bytes;
  NpyType type;
  const char* name;
};
constexpr std::array<TypeEntry, 12> kTypes{{
    {'f', 4, NpyType::F32, "float32"}, {'f', 8, NpyType::F64, "float64"},
    {'f', 2, NpyType::F16, "float16"}, {'i', 1, NpyType::I8, "int8"},
    {'i', 2, NpyType::I16, "int16"},   {'i', 4, NpyType::I32, "int32"},
    {'i', 8, NpyType::I64, "int64"},   {'u', 1, NpyType::U8, "uint8"},
    {'u', 2, NpyType::U16, "uint16"},  {'u', 4, NpyType::U32, "uint32"},
    {'u', 8, NpyType::U64, "uint64"},  {'b', 1, NpyType::Bool, "bool"},
}};

[[noreturn]] void refuse_descr(const std::filesystem::path& file, const std::string& descr,
                               std::string_view why) {
  fail(file, detail::concat("dtype '", descr, "' ", why,
                            " (noeira reads float32/64/16, integers and bool)"));
}

// The type a descr names ('<f4', '|u1', '=i8'), or why it is refused.
const TypeEntry& parse_descr(const std::filesystem::path& file, const std::string& descr) {
  auto refuse = [&](std::string_view why) { refuse_descr(file, descr, why); };
  if (descr.size() < 2) refuse("is not a NumPy type string");
  const char order = descr[0];
  const char kind = descr[1];
  const std::string_view digits = std::string_view(descr).substr(2);
  switch (kind) {
    case 'O': refuse_descr(file, descr, "holds Python objects, not numbers");
    case 'U': case 'S': case 'a': refuse_descr(file, descr, "holds strings");
    case 'c': refuse_descr(file, descr, "is complex");
    case 'M': case 'm': refuse_descr(file, descr, "holds dates or times");
    case 'V': refuse_descr(file, descr, "is a raw or structured record");
    default: break;
  }
  if (digits.empty()) refuse("is not a NumPy type string");
  std::size_t bytes = 0;
  for (const char d : digits) {
    if (d < '0' || d > '9' || bytes > 64) refuse("is not a NumPy type string");
    bytes = bytes * 10 + static_cast<std::size_t>(d - '0');
  }
  if (order != '<' && order != '|' && order != '=' && order != '>') {
    refuse("is not a NumPy type string");
  }
  if (order == '>' && bytes > 1) {
    refuse("is big-endian (save it with .astype(its '<' type))");
  }
  for (const TypeEntry& t : kTypes) {
    if (t.kind == kind && t.bytes == bytes) return t;
  }
  refuse_descr(file, descr, "is not supported");
}

// The header dict NumPy writes, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  HeaderParser(const std::filesystem::path& file, std::string_view text) : file_(file), s_(text) {}

  NpyHeader parse() {
    NpyHeader h;
    std::optional<bool> fortran;
    bool have_descr = false, have_shape = false;
    expect('{');
    while (!peek('}')) {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr" && !have_descr) {
        if (peek('[')) fail(file_, "header: 'descr' is a structured record type, not a number type");
        h.descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order" && !fortran) {
        fortran = boolean();
      } else if (key == "shape" && !have_shape) {
        h.shape = shape();
        have_shape = true;
      } else {
        fail(file_, detail::concat("header: unexpected or repeated key '", key, "'"));
      }
      if (!peek('}')) expect(',');
    }
    expect('}');
    skip_space();
    if (pos_ != s_.size()) fail(file_, "header: text after the closing '}'");
    if (!have_descr || !fortran || !have_shape) {
      fail(file_, "header: needs 'descr', 'fortran_order' and 'shape'");
    }
    if (*fortran) {
      fail(file_, "is in Fortran (column) order; save it with numpy.ascontiguousarray first");
    }
    return h;
  }

 private:
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t')) ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(file_, detail::concat("header: expected '", std::string(1, c), "' at ", pos_));
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) {
      fail(file_, detail::concat("header: expected a quoted string at ", pos_));
    }
    const char quote = s_[pos_++];
    const std::size_t end = s_.find(quote, pos_);
    if (end == std::string_view::npos || end - pos_ > 64) fail(file_, "header: unterminated string");
    std::string out(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (s_.substr(pos_).starts_with(word)) {
        pos_ += std::strlen(word);
        return value;
      }
    }
    fail(file_, "header: 'fortran_order' is neither True nor False");
  }
  std::vector<std::int64_t> shape() {
    std::vector<std::int64_t> dims;
    expect('(');
    while (!peek(')')) {
      if (dims.size() == kMaxDims) fail(file_, "header: more than 32 dimensions");
      std::int64_t d = 0;
      const std::size_t start = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (d > (std::numeric_limits<std::int64_t>::max() - 9) / 10) {
          fail(file_, "header: a dimension too large");
        }
        d = d * 10 + (s_[pos_++] - '0');
      }
      if (pos_ == start) fail(file_, detail::concat("header: 'shape' holds a non-integer at ", pos_));
      if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2's long
      dims.push_back(d);
      if (!peek(')')) expect(',');
    }
    expect(')');
    return dims;
  }

  const std::filesystem::path& file_;
  std::string_view s_;
  std::size_t pos_ = 0;
};

std::uint64_t checked_bytes(const std::filesystem::path& file, const NpyHeader& h) {
  std::uint64_t n = h.item_bytes;
  for (const std::int64_t d : h.shape) {
    if (d != 0 && n > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(d)) {
      fail(file, "header: the shape's size overflows");
    }
    n *= static_cast<std::uint64_t>(d);
  }
  return n;
}

}  // namespace

const char* npy_type_name(NpyType type) {
  if (type == NpyType::BF16) return "bfloat16";
  for (const TypeEntry& t : kTypes) {
    if (t.type == type) return t.name;
  }
  return "unknown";
}

std::int64_t NpyHeader::elements() const {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

std::int64_t NpyHeader::row_elements() const {
  std::int64_t n = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

NpyHeader read_npy_header(const std::filesystem::path& name, const NpyByteReader& read,
                          std::uint64_t total_bytes) {
  const auto& path = name;
  std::array<char, 12> prefix{};
  if (read(prefix.data(), 8) != 8 || std::string_view(prefix.data(), 6) != kMagic) {
    fail(path, "not a NumPy .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<unsigned char>(prefix[6]);
  const int minor = static_cast<unsigned char>(prefix[7]);
  if (minor != 0 || major < 1 || major > 3) {
    fail(path, detail::concat(".npy format version ", major, ".", minor,
                              " (noeira reads 1.0, 2.0 and 3.0)"));
  }
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  if (read(prefix.data() + 8, length_bytes) != length_bytes) fail(path, "truncated header");
  std::uint32_t header_len = 0;
  for (std::size_t i = 0; i < length_bytes; ++i) {
    header_len |= static_cast<std::uint32_t>(static_cast<unsigned char>(prefix[8 + i])) << (8 * i);
  }
  const std::uint64_t offset = 8 + length_bytes + header_len;
  if (header_len > kMaxHeaderBytes || offset > total_bytes) {
    fail(path, detail::concat("header of ", header_len, " bytes in a file of ", total_bytes));
  }
  std::string text(header_len, '\0');
  if (read(text.data(), header_len) != header_len) fail(path, "truncated header");
  if (text.empty() || text.back() != '\n') fail(path, "header: does not end with a newline");
  NpyHeader h = HeaderParser(path, text).parse();
  const TypeEntry& type = parse_descr(path, h.descr);
  h.type = type.type;
  h.item_bytes = type.bytes;
  h.data_offset = offset;
  const std::uint64_t need = checked_bytes(path, h);
  const std::uint64_t have = total_bytes - offset;
  if (have != need) {
    std::string shape;
    for (const std::int64_t d : h.shape) shape += detail::concat(shape.empty() ? "" : ", ", d);
    fail(path, detail::concat("holds ", have, " bytes of data where shape (", shape, ") of ",
                              type.name, " needs ", need,
                              have < need ? " (truncated)" : " (bytes after the array)"));
  }
  return h;
}

NpyHeader read_npy_header(const std::filesystem::path& path) {
  require_regular_file(path, "a NumPy .npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  return read_npy_header(
      path,
      [&](char* out, std::size_t n) {
        in.read(out, static_cast<std::streamsize>(n));
        return static_cast<std::size_t>(in.gcount());
      },
      std::filesystem::file_size(path));
}

NpyArray NpyArray::open(const std::filesystem::path& path) {
  NpyHeader header = read_npy_header(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open");
  const auto size = static_cast<std::size_t>(std::filesystem::file_size(path));
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) fail(path, "cannot map the file into memory");
  // The header checked above must still be the file's: a file replaced in between is refused.
  if (size != header.data_offset + static_cast<std::uint64_t>(header.elements()) * header.item_bytes) {
    ::munmap(map, size);
    fail(path, "changed while it was opened");
  }
  return NpyArray(path, std::move(header), static_cast<const std::byte*>(map), size);
}

NpyArray::NpyArray(std::filesystem::path path, NpyHeader header, const std::byte* map,
                   std::size_t size)
    : path_(std::move(path)), header_(std::move(header)), map_(map), map_size_(size) {}

NpyArray::NpyArray(NpyArray&& other) noexcept
    : path_(std::move(other.path_)),
      header_(std::move(other.header_)),
      map_(std::exchange(other.map_, nullptr)),
      map_size_(std::exchange(other.map_size_, 0)) {}

NpyArray& NpyArray::operator=(NpyArray&& other) noexcept {
  if (this != &other) {
    if (map_ != nullptr) ::munmap(const_cast<std::byte*>(map_), map_size_);
    path_ = std::move(other.path_);
    header_ = std::move(other.header_);
    map_ = std::exchange(other.map_, nullptr);
    map_size_ = std::exchange(other.map_size_, 0);
  }
  return *this;
}

NpyArray::~NpyArray() {
  if (map_ != nullptr) ::munmap(const_cast<std::byte*>(map_), map_size_);
}

const std::byte* NpyArray::row_bytes(std::int64_t begin, std::int64_t count,
                                     std::size_t out_size) const {
  const std::int64_t rows = header_.rows();
  if (begin < 0 || count < 0 || begin > rows || count > rows - begin) {
    fail(path_, detail::concat("rows ", begin, "..", begin + count, " asked of ", rows));
  }
  const auto per_row = static_cast<std::size_t>(header_.row_elements());
  if (out_size != static_cast<std::size_t>(count) * per_row) {
    throw Error(detail::concat(path_.string(), ": ", count, " rows of ", per_row,
                               " elements into a buffer of ", out_size));
  }
  return map_ + header_.data_offset +
         static_cast<std::size_t>(begin) * per_row * header_.item_bytes;
}

namespace {

// Element i of raw data of `type`, as T (memcpy: the data need not be aligned).
template <class T>
T element(const std::byte* data, NpyType type, std::size_t i) {
  auto load = [&]<class S>(S) {
    S v;
    std::memcpy(&v, data + i * sizeof(S), sizeof(S));
    return v;
  };
  switch (type) {
    case NpyType::F32: return static_cast<T>(load(float{}));
    case NpyType::F64: return static_cast<T>(load(double{}));
    case NpyType::F16: return static_cast<T>(half_to_float(load(std::uint16_t{})));
    case NpyType::I8: return static_cast<T>(load(std::int8_t{}));
    case NpyType::I16: return static_cast<T>(load(std::int16_t{}));
    case NpyType::I32: return static_cast<T>(load(std::int32_t{}));
    case NpyType::I64: return static_cast<T>(load(std::int64_t{}));
    case NpyType::U8: return static_cast<T>(load(std::uint8_t{}));
    case NpyType::U16: return static_cast<T>(load(std::uint16_t{}));
    case NpyType::U32: return static_cast<T>(load(std::uint32_t{}));
    case NpyType::U64: return static_cast<T>(load(std::uint64_t{}));
    case NpyType::Bool: return static_cast<T>(load(std::uint8_t{}) != 0);
    case NpyType::BF16: {
      const std::uint32_t bits = static_cast<std::uint32_t>(load(std::uint16_t{})) << 16;
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return static_cast<T>(f);
    }
  }
  return T{};
}

// Lets the kernel drop the mapped pages that hold [data, data + bytes) from this process's
// resident memory once they are read: a caller that copies an array out (a data set loaded into
// memory) then holds the copy, not the copy and the file's pages beside it, and one that reads
// rows batch by batch (streamed features) holds none of them. Every page touched goes, the
// partial ones at either end too: the mapping is read-only and backed by the file, so a page
// another read still needs is mapped again from the page cache, where it stays.
void release_pages(const std::byte* data, std::size_t bytes) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = begin / page * page;
  const std::uintptr_t last = (begin + bytes + page - 1) / page * page;
  // Advice only: a failure leaves the pages resident, which is what not asking would.
  if (last > first) (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace

void convert_npy_elements(const NpyHeader& h, const std::byte* data, std::span<float> out) {
  // An empty read (zero rows, or rows of zero elements) copies nothing; memcpy must not
  // see the null pointers an empty span and an empty mapping may carry.
  if (out.empty()) return;
  if (h.type == NpyType::F32) {
    std::memcpy(out.data(), data, out.size_bytes());
  } else {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = element<float>(data, h.type, i);
  }
}

void convert_npy_elements(const NpyHeader& h, const std::byte* data,
                          std::span<std::int64_t> out, const std::filesystem::path& name,
                          std::int64_t first_row) {
  const NpyType t = h.type;
  if (h.holds_floats()) {
    fail(name, detail::concat("holds ", npy_type_name(t), ", expected integers (labels or ids)"));
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (t == NpyType::U64) {
      // Refused rather than wrapped: a uint64 past int64's range is no label or id.
      const auto v = element<std::uint64_t>(data, t, i);
      if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        fail(name, detail::concat("row ", first_row + static_cast<std::int64_t>(i) /
                                                         std::max<std::int64_t>(1, h.row_elements()),
                                  " holds ", v, ", past int64's range"));
      }
    }
    out[i] = element<std::int64_t>(data, t, i);
  }
}

void NpyArray::read_rows(std::int64_t begin, std::int64_t count, std::span<float> out) const {
  const std::byte* data = row_bytes(begin, count, out.size());
  convert_npy_elements(header_, data, out);
  if (!out.empty()) release_pages(data, out.size() * header_.item_bytes);
}

void NpyArray::read_rows(std::int64_t begin, std::int64_t count,
                         std::span<std::int64_t> out) const {
  const std::byte* data = row_bytes(begin, count, out.size());
  convert_npy_elements(header_, data, out, path_, begin);
  if (!out.empty()) release_pages(data, out.size() * header_.item_bytes);
}

}  // namespace noeira::io
