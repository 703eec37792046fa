#pragma once
// NumPy's .npy arrays (format versions 1.0, 2.0 and 3.0), read in place: the header is parsed and
// checked whole before anything else, and the data is memory-mapped, so an array larger than
// memory costs only the pages of the rows that are read.
//
// A read lets go of the pages it read (madvise), so an array copied out in pieces costs the copy
// and one piece of the file in resident memory, not the whole file beside the copy.
//
// Taken: little-endian (or one-byte) numbers, C order: float32, float64, float16, int8/16/32/64,
// uint8/16/32/64 and bool, of any shape (a 0-d array is one row of one element). Refused, each in
// one line naming the file: another magic or version, a header that is not exactly the dict NumPy
// writes ('descr', 'fortran_order', 'shape'), Fortran order, big-endian, object, structured,
// string, complex and date types, a shape whose size overflows, and data shorter or longer than
// the shape says (a truncated or appended file).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace noeira::io {

// BF16 (bfloat16 bits) no .npy header names: a program's arrays in memory (io/memory_array.hpp)
// share the conversions.
enum class NpyType : std::uint8_t { F32, F64, F16, I8, I16, I32, I64, U8, U16, U32, U64, Bool, BF16 };

struct NpyHeader {
  NpyType type = NpyType::F32;
  std::string descr;                // as the file says it ('<f4')
  std::vector<std::int64_t> shape;  // empty: a 0-d array
  std::uint64_t data_offset = 0;    // where the elements begin in the file
  std::size_t item_bytes = 0;

  std::int64_t elements() const;
  // Rows are the first dimension; a 0-d array is one row.
  std::int64_t rows() const { return shape.empty() ? 1 : shape.front(); }
  std::int64_t row_elements() const;
  // float32, float64, float16 or bfloat16: values, not labels or ids.
  bool holds_floats() const {
    return type == NpyType::F32 || type == NpyType::F64 || type == NpyType::F16 ||
           type == NpyType::BF16;
  }
};

// The header of `path`, checked against the file's size; InputError naming the file otherwise.
NpyHeader read_npy_header(const std::filesystem::path& path);

// Reads up to n bytes of an array's beginning into out, in order, returning how many it read.
using NpyByteReader = std::function<std::size_t(char* out, std::size_t n)>;
// The same from an array of `total_bytes` whose bytes `read` gives (a member of a .npz archive);
// `name` names it in messages.
NpyHeader read_npy_header(const std::filesystem::path& name, const NpyByteReader& read,
                          std::uint64_t total_bytes);

// out.size() elements of `h`'s type at `data` (the array's raw bytes), converted as
// NpyArray::read_rows converts them; the second for labels and ids, refusing floats and a uint64
// past int64 (naming `name` and the row, counted from first_row).
void convert_npy_elements(const NpyHeader& h, const std::byte* data, std::span<float> out);
void convert_npy_elements(const NpyHeader& h, const std::byte* data,
                          std::span<std::int64_t> out, const std::filesystem::path& name,
                          std::int64_t first_row);

// "float32", "uint8", ...: NumPy's names, for messages.
const char* npy_type_name(NpyType type);

class NpyArray {
 public:
  static NpyArray open(const std::filesystem::path& path);
  NpyArray(NpyArray&& other) noexcept;
  NpyArray& operator=(NpyArray&& other) noexcept;
  NpyArray(const NpyArray&) = delete;
  NpyArray& operator=(const NpyArray&) = delete;
  ~NpyArray();

  const std::filesystem::path& path() const { return path_; }
  const NpyHeader& header() const { return header_; }

  // Rows [begin, begin + count) as float32 (every type converts; int64 and float64 round to the
  // nearest float), into out of count · row_elements() values. InputError for rows past the end.
  void read_rows(std::int64_t begin, std::int64_t count, std::span<float> out) const;
  // The same as int64, for labels and token ids: integer and bool types only (a float array
  // here is refused, naming the type).
  void read_rows(std::int64_t begin, std::int64_t count, std::span<std::int64_t> out) const;

 private:
  NpyArray(std::filesystem::path path, NpyHeader header, const std::byte* map, std::size_t size);
  const std::byte* row_bytes(std::int64_t begin, std::int64_t count, std::size_t out_size) const;

  std::filesystem::path path_;
  NpyHeader header_;
  const std::byte* map_ = nullptr;  // the whole file, read-only
  std::size_t map_size_ = 0;
};

}  // namespace noeira::io
