#pragma once
// A user's numeric array, read by rows whatever holds it: a NumPy .npy file (io/npy.hpp) or an
// HDF5 dataset (`file.h5` and the dataset's path in it). The first dimension is the rows (a 0-d
// array is one row); a row's elements are the rest, in C order. Every element type converts to
// float32 (int64 and float64 round to the nearest float), or, for labels and ids, integer and bool
// types to int64 (a float array there is refused, naming its type).
//
// An HDF5 dataset is opened only as io/h5.hpp's open_dataset allows (hard links, data stored in
// the file itself, the built-in filters only) and holds integers or floats of up to 8 bytes, of
// either byte order (HDF5 converts them); strings, compounds, enums, references and the rest are
// refused by name. Rows are read as hyperslabs: a read costs the rows it asks for.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace noeira::io {

class ArraySource {
 public:
  virtual ~ArraySource() = default;

  // For messages: "d/train_x.npy", "d/train.h5:/x".
  const std::string& name() const { return name_; }
  // Empty for a 0-d array.
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t rows() const { return shape_.empty() ? 1 : shape_.front(); }
  std::int64_t row_elements() const;
  // Whether the elements are floating point (regression targets rather than labels).
  virtual bool holds_floats() const = 0;
  // Whether the rows are in this process's memory already (io/memory_array.hpp): features are
  // then read from there batch by batch, never copied whole.
  virtual bool in_memory() const { return false; }

  // Rows [begin, begin + count) into out, which holds count · row_elements() values; rows past
  // the end are an InputError.
  virtual void read_rows(std::int64_t begin, std::int64_t count, std::span<float> out) const = 0;
  virtual void read_rows(std::int64_t begin, std::int64_t count,
                         std::span<std::int64_t> out) const = 0;

 protected:
  ArraySource(std::string name, std::vector<std::int64_t> shape)
      : name_(std::move(name)), shape_(std::move(shape)) {}

 private:
  std::string name_;
  std::vector<std::int64_t> shape_;
};

std::unique_ptr<ArraySource> open_npy_source(const std::filesystem::path& file);
// `dataset` is the dataset's path in the file ("x", "fields/temperature").
std::unique_ptr<ArraySource> open_h5_source(const std::filesystem::path& file,
                                            const std::string& dataset);

}  // namespace noeira::io
