#pragma once
// Damaging checkpoint files on purpose: where a dataset's bytes start, and flipping one byte.
#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "io/h5.hpp"

namespace noeira::testing {

// Where a dataset's bytes start in its file (contiguous layout), or -1 when the file lacks it.
inline std::int64_t data_offset(const std::filesystem::path& file, const std::string& dataset) {
  io::h5::Lock held = io::h5::lock();
  io::h5::Handle f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (f.get() < 0 || !io::h5::path_exists(f.get(), dataset, file)) return -1;
  io::h5::Handle ds(H5Dopen2(f.get(), dataset.c_str(), H5P_DEFAULT), H5Dclose);
  const haddr_t addr = H5Dget_offset(ds.get());
  return addr == HADDR_UNDEF ? -1 : static_cast<std::int64_t>(addr);
}

// Inverts the bits of `mask` in the byte at `at`, in place; an offset outside the file is an
// error.
inline void xor_byte(const std::filesystem::path& file, std::int64_t at, unsigned char mask) {
  if (at < 0 || static_cast<std::uintmax_t>(at) >= std::filesystem::file_size(file)) {
    throw std::out_of_range("xor_byte: offset " + std::to_string(at) + " outside " +
                            file.string());
  }
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(static_cast<unsigned char>(c) ^ mask));
}

// Inverts every bit of the byte at `at`.
inline void flip_byte(const std::filesystem::path& file, std::int64_t at) {
  xor_byte(file, at, 0xff);
}

}  // namespace noeira::testing
