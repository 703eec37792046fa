#pragma once
// IDX files (the MNIST format: Fashion-MNIST, MNIST, KMNIST), gzip-compressed or not. The header
// is checked against what the caller expects, so a file of the wrong kind, a truncated download or
// a stray byte is an InputError naming the file, never a silently short data set.
//
// Layout: a big-endian magic 0x000008NN (0x08 = unsigned bytes, NN = number of dimensions), NN
// big-endian uint32 dimensions, then the bytes in row-major order.
#include <cstdint>
#include <filesystem>
#include <vector>

namespace noeira::io {

inline constexpr std::uint32_t kIdxImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
inline constexpr std::uint32_t kIdxLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension

struct IdxImages {
  std::int64_t count = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<std::uint8_t> pixels;  // [count, rows, cols]
};

// Reads an images file (magic 0x00000803). Plain and gzip files are both accepted, whatever the
// name says (zlib reads uncompressed files transparently).
IdxImages read_idx_images(const std::filesystem::path& file);

// Reads a labels file (magic 0x00000801); every label must be below num_classes.
std::vector<std::uint8_t> read_idx_labels(const std::filesystem::path& file, int num_classes);

// "<dir>/<stem>.gz" when it exists, else "<dir>/<stem>" when it exists; otherwise an InputError
// naming both candidates.
std::filesystem::path find_idx_file(const std::filesystem::path& dir, const std::string& stem);

}  // namespace noeira::io
