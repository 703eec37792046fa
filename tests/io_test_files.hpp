#pragma once
// Small data files written by the tests themselves: IDX (plain or gzip), CIFAR-10 batches, NumPy
// .npy arrays and raw bytes, in a per-test temporary directory that is removed afterwards.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace noeira::testing {

// A fresh directory under the system temp dir, named after the running test; removed on
// destruction.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("noeira-" + std::string(info->test_suite_name()) + "-" + info->name() + "-" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& file, const std::vector<std::uint8_t>& bytes,
                        bool gzip) {
  if (gzip) {
    gzFile f = gzopen(file.c_str(), "wb");
    ASSERT_NE(f, nullptr) << file;
    if (!bytes.empty()) {
      ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
                static_cast<int>(bytes.size()));
    }
    ASSERT_EQ(gzclose(f), Z_OK);
  } else {
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << file;
  }
}

// A .npy file of version 1.0 with this header text (padded as NumPy pads) and `data` after it.
inline void write_npy(const std::filesystem::path& file, std::string header,
                      const std::string& data, const std::string& magic = "\x93NUMPY\x01",
                      char minor = 0) {
  header += std::string((64 - (10 + header.size() + 1) % 64) % 64, ' ') + "\n";
  std::ofstream out(file, std::ios::binary);
  out << magic << minor;
  out.put(static_cast<char>(header.size() & 0xff)).put(static_cast<char>(header.size() >> 8));
  out << header << data;
}

// `values` as a C-order .npy array of NumPy type `descr` ('<f4', '<i8', ...) and this shape,
// the header as NumPy writes it.
template <class T>
void write_npy_array(const std::filesystem::path& file, const std::string& descr,
                     const std::vector<std::int64_t>& shape, const std::vector<T>& values) {
  std::string dims;
  for (const std::int64_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  if (shape.size() == 1) dims += ",";
  std::string data(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(data.data(), values.data(), data.size());
  write_npy(file, "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }",
            data);
}

inline void put_be32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 24));
  out.push_back(static_cast<std::uint8_t>(v >> 16));
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v));
}

// An IDX images file's bytes: header (magic, count, rows, cols) then the pixels as given.
inline std::vector<std::uint8_t> idx_images_bytes(std::uint32_t count, std::uint32_t rows,
                                                  std::uint32_t cols,
                                                  const std::vector<std::uint8_t>& pixels,
                                                  std::uint32_t magic = 0x00000803) {
  std::vector<std::uint8_t> out;
  put_be32(out, magic);
  put_be32(out, count);
  put_be32(out, rows);
  put_be32(out, cols);
  out.insert(out.end(), pixels.begin(), pixels.end());
  return out;
}

inline std::vector<std::uint8_t> idx_labels_bytes(std::uint32_t count,
                                                  const std::vector<std::uint8_t>& labels,
                                                  std::uint32_t magic = 0x00000801) {
  std::vector<std::uint8_t> out;
  put_be32(out, magic);
  put_be32(out, count);
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

// Pixel i of a test pattern: a value that differs between neighbouring pixels and images.
inline std::uint8_t pattern_pixel(std::size_t i) { return static_cast<std::uint8_t>((i * 37 + 11) % 256); }

inline std::vector<std::uint8_t> pattern(std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = pattern_pixel(i);
  return v;
}

// A Fashion-MNIST-shaped directory (train-*/t10k-* files, 28x28) with `train` and `test` images:
// image k of class k % 10 has a class-dependent bright block, so a model can learn it.
inline void write_tiny_mnist(const std::filesystem::path& dir, std::uint32_t train,
                             std::uint32_t test, bool gzip) {
  auto split = [&](const std::string& prefix, std::uint32_t count, std::uint32_t offset) {
    std::vector<std::uint8_t> pixels(static_cast<std::size_t>(count) * 784);
    std::vector<std::uint8_t> labels(count);
    for (std::uint32_t k = 0; k < count; ++k) {
      const std::uint8_t c = static_cast<std::uint8_t>((k + offset) % 10);
      labels[k] = c;
      for (std::size_t p = 0; p < 784; ++p) {
        const std::size_t row = p / 28;
        const bool on = row / 3 == c;  // class c: rows 3c..3c+2 bright
        pixels[k * 784 + p] = static_cast<std::uint8_t>(
            on ? 200 + pattern_pixel(k * 784 + p) % 50 : pattern_pixel(k * 784 + p) % 60);
      }
    }
    const std::string ext = gzip ? ".gz" : "";
    write_bytes(dir / (prefix + "-images-idx3-ubyte" + ext),
                idx_images_bytes(count, 28, 28, pixels), gzip);
    write_bytes(dir / (prefix + "-labels-idx1-ubyte" + ext), idx_labels_bytes(count, labels),
                gzip);
  };
  std::filesystem::create_directories(dir);
  split("train", train, 0);
  split("t10k", test, 3);
}

// A CIFAR-10 directory (data_batch_1.bin .. data_batch_5.bin of `per_batch` images each, and
// test_batch.bin of `test`): image k of class k % 10 has a bright block of rows 3c..3c+2 in its red
// plane, a pattern elsewhere, and a black first pixel in every plane.
inline void write_tiny_cifar(const std::filesystem::path& dir, std::uint32_t per_batch,
                             std::uint32_t test) {
  auto batch = [&](const std::string& file, std::uint32_t count, std::uint32_t offset) {
    std::vector<std::uint8_t> bytes;
    for (std::uint32_t k = 0; k < count; ++k) {
      const std::uint32_t c = (k + offset) % 10;
      bytes.push_back(static_cast<std::uint8_t>(c));
      for (std::size_t p = 0; p < 3072; ++p) {
        const std::size_t plane = p / 1024, pixel = p % 1024, row = pixel / 32;
        const std::uint8_t noise = pattern_pixel((k + offset) * 3072 + p) % 60;
        const bool on = plane == 0 && row / 3 == c;
        bytes.push_back(pixel == 0 ? 0 : static_cast<std::uint8_t>(on ? 200 + noise % 50 : noise));
      }
    }
    write_bytes(dir / file, bytes, false);
  };
  std::filesystem::create_directories(dir);
  for (std::uint32_t b = 1; b <= 5; ++b) {
    batch("data_batch_" + std::to_string(b) + ".bin", per_batch, b * per_batch);
  }
  batch("test_batch.bin", test, 7);
}

}  // namespace noeira::testing
