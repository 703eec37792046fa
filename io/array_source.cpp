#include "io/array_source.hpp"

#include "io/npy.hpp"

namespace noeira::io {

std::int64_t ArraySource::row_elements() const {
  std::int64_t n = 1;
  for (std::size_t i = 1; i < shape_.size(); ++i) n *= shape_[i];
  return n;
}

namespace {

class NpySource final : public ArraySource {
 public:
  explicit NpySource(NpyArray array)
      : ArraySource(array.path().string(), array.header().shape), array_(std::move(array)) {}

  bool holds_floats() const override { return array_.header().holds_floats(); }
  void read_rows(std::int64_t begin, std::int64_t count, std::span<float> out) const override {
    array_.read_rows(begin, count, out);
  }
  void read_rows(std::int64_t begin, std::int64_t count,
                 std::span<std::int64_t> out) const override {
    array_.read_rows(begin, count, out);
  }

 private:
  NpyArray array_;
};

}  // namespace

std::unique_ptr<ArraySource> open_npy_source(const std::filesystem::path& file) {
  return std::make_unique<NpySource>(NpyArray::open(file));
}

}  // namespace noeira::io
