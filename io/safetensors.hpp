#pragma once
// The safetensors format (Hugging Face's; what PyTorch users hand weights around in), read and
// written without the Python library:
//
//   8 bytes   N, the header's length, unsigned little-endian
//   N bytes   a JSON object: "<tensor name>": {"dtype": "F32", "shape": [2, 3],
//             "data_offsets": [begin, end]} for every tensor, and an optional "__metadata__"
//             object of string -> string
//   the rest  the data section: every tensor's bytes, little-endian and row-major, at
//             [begin, end) relative to the section's start
//
// The writer stores F32 (and I64 for integer counters such as BatchNorm's num_batches_tracked),
// pads the header with spaces to a multiple of 8, and writes "<file>.tmp" then renames it, so a
// crashed write never leaves a file that looks complete.
//
// The reader checks everything before it allocates anything large: the header's length against
// the file's size and a cap, the JSON, every dtype, shape x dtype size == end - begin, offsets
// inside the data section, no overlap and no gap (the tensors cover the section exactly). Any
// failure is one InputError naming the file and the tensor. Values come back as float32: F32 as
// is, F64, F16 and BF16 converted (PyTorch files hold them); integer tensors (I64, I32, ...) only
// through read_counter, for counters the caller knows are integers.
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.hpp"

namespace noeira::io {

// The largest header read or written. The format's reference reader allows 100 MB, but a header
// is parsed whole into JSON at tens of bytes per byte (a 98 MB one took 3.7 GB and 11 s), and
// noeira's presets need far less: gpt2-124m under PyTorch's names is about 15 KB of tensor
// entries, and the largest metadata, a char vocabulary, is at most 8 bytes per id (under 400 KB
// for GPT-2's 50257 ids). 1 MiB holds either with room; its parse costs tens of MB at most.
inline constexpr std::uint64_t kSafetensorsMaxHeader = std::uint64_t{1} << 20;

enum class StDtype { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

std::string_view to_string(StDtype dtype);
std::int64_t dtype_bytes(StDtype dtype);
bool is_floating(StDtype dtype);

// A tensor to write: float32 values, stored as F32 or, for integer counters, as I64 (each value
// must then be a whole number).
struct StTensorOut {
  std::string name;
  Shape shape;
  std::span<const float> values;
  StDtype dtype = StDtype::F32;
};

// Writes the tensors in the given order with `metadata` as "__metadata__" (left out when empty).
// A duplicate name, a value count that is not the shape's, or a non-whole I64 value is an
// InputError naming the tensor; nothing is left behind.
void save_safetensors(const std::filesystem::path& file, const std::vector<StTensorOut>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// One tensor of a file, as its header describes it.
struct StEntry {
  std::string name;
  StDtype dtype = StDtype::F32;
  Shape shape;
  std::uint64_t begin = 0;  // [begin, end) in the data section
  std::uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Reads and checks the header (InputError on anything wrong, see above).
  static SafetensorsFile open(const std::filesystem::path& file);

  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Every tensor, in the order of their data.
  const std::vector<StEntry>& entries() const { return entries_; }
  // The tensor called `name`, or null.
  const StEntry* find(std::string_view name) const;

  // A floating tensor's values as float32 (F64 rounded, F16 and BF16 widened); an integer one is
  // an InputError naming it.
  std::vector<float> read_float(const StEntry& entry) const;
  // An integer (or floating) tensor's values as float32, each exact: a count beyond 2^24 or a
  // fraction is an InputError naming the tensor.
  std::vector<float> read_counter(const StEntry& entry) const;
  // Whether two tensors are the same bits: dtype, shape and data (compared a block at a time).
  bool same_bytes(const StEntry& a, const StEntry& b) const;

 private:
  std::vector<unsigned char> read_bytes(const StEntry& entry) const;

  std::filesystem::path path_;
  std::uint64_t data_start_ = 0;  // 8 + header length
  std::map<std::string, std::string> metadata_;
  std::vector<StEntry> entries_;
};

// Whether `file` is named as a safetensors file (".safetensors").
bool is_safetensors_path(const std::filesystem::path& file);

}  // namespace noeira::io
