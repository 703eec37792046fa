
#include "io/array_source.hpp"
#include "io/h5.hpp"
#include "kernels/error.hpp"

// open_h5_source (io/array_source.hpp): a user's HDF5 dataset, read by hyperslabs of rows.
namespace noeira::io {

namespace {

class H5Source final : public ArraySource {
 public:
  H5Source(std::string name, const std::filesystem::path& file, h5::Handle f, h5::Dataset ds)
      : ArraySource(std::move(name), ds.dims),
        file_(file),
        f_(std::move(f)),
        ds_(std::move(ds)) {}

  bool holds_floats() const override { return ds_.floats; }

  void read_rows(std::int64_t begin, std::int64_t count, std::span<float> out) const override {
    read(begin, count, out.size(), H5T_NATIVE_FLOAT, out.data());
  }
  void read_rows(std::int64_t begin, std::int64_t count,
                 std::span<std::int64_t> out) const override {
    if (ds_.floats) {
      throw InputError(detail::concat(name(), ": holds floats, expected integers (labels or ids)"));
    }
    read(begin, count, out.size(), H5T_NATIVE_INT64, out.data());
  }

 private:
  void read(std::int64_t begin, std::int64_t count, std::size_t out_size, hid_t memory_type,
            void* out) const {
    const std::int64_t all = rows();
    if (begin < 0 || count < 0 || begin > all || count > all - begin) {
      throw InputError(detail::concat(name(), ": rows ", begin, "..", begin + count,
                                      " asked of ", all));
    }
    const auto per_row = static_cast<std::size_t>(row_elements());
    NOEIRA_CHECK(out_size == static_cast<std::size_t>(count) * per_row, name(), ": ", count,
                 " rows of ", per_row, " elements into a buffer of ", out_size);
    if (out_size == 0) return;
    h5::Lock held = h5::lock();
    const hid_t ds = ds_.handle.get();
    const h5::Handle file_space(NOEIRA_H5_CHECK_INPUT(H5Dget_space(ds), file_), H5Sclose);
    if (!shape().empty()) {
      std::vector<hsize_t> start(shape().size(), 0), extent(shape().begin(), shape().end());
      start[0] = static_cast<hsize_t>(begin);
      extent[0] = static_cast<hsize_t>(count);
      NOEIRA_H5_CHECK_INPUT(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(),
                                                nullptr, extent.data(), nullptr),
                            file_);
    }
    const hsize_t elements = out_size;
    const h5::Handle memory_space(
        NOEIRA_H5_CHECK_INPUT(H5Screate_simple(1, &elements, nullptr), file_), H5Sclose);
    NOEIRA_H5_CHECK_INPUT(
        H5Dread(ds, memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT, out), file_);
  }

  std::filesystem::path file_;
  h5::Handle f_;
  h5::Dataset ds_;
};

}  // namespace

std::unique_ptr<ArraySource> open_h5_source(const std::filesystem::path& file,
                                            const std::string& dataset) {
  h5::Lock held = h5::lock();
  h5::Handle f = h5::open_for_reading(file);
  h5::DatasetSpec spec;
  spec.any_number = true;
  h5::Dataset ds = h5::open_dataset(f.get(), dataset, spec, file);
  return std::make_unique<H5Source>(detail::concat(file.string(), ":/", dataset), file,
                                    std::move(f), std::move(ds));
}

}  // namespace noeira::io
