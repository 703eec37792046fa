#pragma once
// CIFAR-10 binary batches (data_batch_1.bin ... data_batch_5.bin, test_batch.bin): records of one
// label byte followed by 3072 pixel bytes (1024 red, 1024 green, 1024 blue, each 32x32 row-major).
#include <cstdint>
#include <filesystem>
#include <vector>

namespace noeira::io {

inline constexpr std::int64_t kCifarImageBytes = 3 * 32 * 32;
inline constexpr std::int64_t kCifarRecordBytes = 1 + kCifarImageBytes;
inline constexpr int kCifar10Classes = 10;

struct CifarBatch {
  std::int64_t count = 0;
  std::vector<std::uint8_t> pixels;  // [count, 3, 32, 32] (channel-major, as in the file)
  std::vector<std::uint8_t> labels;  // [count], each in 0..9
};

// Reads one batch file; appends to `out` so several batches form one split. A file whose size is
// not a whole number of records, an empty file or a label above 9 is an InputError naming it.
void read_cifar_batch(const std::filesystem::path& file, CifarBatch& out);

}  // namespace noeira::io
