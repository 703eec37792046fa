#include "io/memory_array.hpp"

#include <map>
#include <mutex>

#include "io/npy.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

namespace {

struct ElementInfo {
  NpyType type;
  std::size_t bytes;
};

ElementInfo info(MemoryElement e) {
  switch (e) {
    case MemoryElement::F32: return {NpyType::F32, 4};
    case MemoryElement::F64: return {NpyType::F64, 8};
    case MemoryElement::BF16: return {NpyType::BF16, 2};
    case MemoryElement::U8: return {NpyType::U8, 1};
    case MemoryElement::I32: return {NpyType::I32, 4};
    case MemoryElement::I64: return {NpyType::I64, 8};
  }
  throw Error("memory array: an element type out of range");
}

// The product of `shape`, or an InputError naming `what` for a shape no array has.
std::int64_t shape_size(const std::vector<std::int64_t>& shape, std::string_view what) {
  if (shape.empty()) {
    throw InputError(detail::concat(what, ": a shape of no dimensions (expected [rows, ...])"));
  }
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    if (d < 0 || (d > 0 && n > INT64_MAX / d)) {
      throw InputError(detail::concat(what, ": dimension ", d, " of the shape is negative or "
                                            "overflows"));
    }
    n *= d;
  }
  return n;
}

template <class T>
MemoryArray view(std::span<const T> values, std::vector<std::int64_t> shape, MemoryElement e) {
  const std::int64_t size = shape_size(shape, "memory_array");
  if (static_cast<std::int64_t>(values.size()) != size) {
    throw InputError(detail::concat("memory_array: ", values.size(), " values for a shape of ",
                                    size));
  }
  return MemoryArray{values.data(), e, std::move(shape)};
}

std::mutex registry_mutex;
std::map<std::string, MemoryArray, std::less<>>& registry() {
  static std::map<std::string, MemoryArray, std::less<>> arrays;
  return arrays;
}

// A provided array, read in place: its header as a .npy's would be, for the shared conversions.
class MemorySource final : public ArraySource {
 public:
  MemorySource(std::string name, const MemoryArray& a)
      : ArraySource(std::move(name), a.shape), data_(static_cast<const std::byte*>(a.data)) {
    const ElementInfo e = info(a.element);
    header_.type = e.type;
    header_.item_bytes = e.bytes;
    header_.shape = a.shape;
  }

  bool holds_floats() const override { return header_.holds_floats(); }
  bool in_memory() const override { return true; }
  void read_rows(std::int64_t begin, std::int64_t count, std::span<float> out) const override {
    convert_npy_elements(header_, at(begin, count, out.size()), out);
  }
  void read_rows(std::int64_t begin, std::int64_t count,
                 std::span<std::int64_t> out) const override {
    convert_npy_elements(header_, at(begin, count, out.size()), out, name(), begin);
  }

 private:
  const std::byte* at(std::int64_t begin, std::int64_t count, std::size_t out_size) const {
    if (begin < 0 || count < 0 || begin + count > rows() ||
        static_cast<std::int64_t>(out_size) != count * row_elements()) {
      throw Error(detail::concat(name(), ": rows ", begin, " to ", begin + count, " of ", rows(),
                                 " into a buffer of ", out_size));
    }
    return data_ + static_cast<std::size_t>(begin * row_elements()) * header_.item_bytes;
  }

  const std::byte* data_;
  NpyHeader header_;
};

}  // namespace

MemoryArray memory_array(std::span<const float> v, std::vector<std::int64_t> shape) {
  return view(v, std::move(shape), MemoryElement::F32);
}
MemoryArray memory_array(std::span<const double> v, std::vector<std::int64_t> shape) {
  return view(v, std::move(shape), MemoryElement::F64);
}
MemoryArray memory_array(std::span<const std::uint8_t> v, std::vector<std::int64_t> shape) {
  return view(v, std::move(shape), MemoryElement::U8);
}
MemoryArray memory_array(std::span<const std::int32_t> v, std::vector<std::int64_t> shape) {
  return view(v, std::move(shape), MemoryElement::I32);
}
MemoryArray memory_array(std::span<const std::int64_t> v, std::vector<std::int64_t> shape) {
  return view(v, std::move(shape), MemoryElement::I64);
}
MemoryArray memory_array_bf16(std::span<const std::uint16_t> bits,
                              std::vector<std::int64_t> shape) {
  return view(bits, std::move(shape), MemoryElement::BF16);
}

void provide_array(std::string name, MemoryArray array) {
  const std::string what = detail::concat(kMemoryPrefix, name);
  if (name.empty() || name.find(',') != std::string::npos) {
    throw InputError(detail::concat("provide_array: '", name,
                                    "' is no array name (not empty, no ',')"));
  }
  const std::int64_t size = shape_size(array.shape, what);
  if (array.data == nullptr && size > 0) {
    throw InputError(detail::concat(what, ": no memory (a null pointer) for ", size, " elements"));
  }
  (void)info(array.element);
  const std::lock_guard lock(registry_mutex);
  registry().insert_or_assign(std::move(name), std::move(array));
}

void withdraw_array(std::string_view name) {
  const std::lock_guard lock(registry_mutex);
  if (const auto it = registry().find(name); it != registry().end()) registry().erase(it);
}

std::unique_ptr<ArraySource> open_memory_source(std::string_view name) {
  const std::lock_guard lock(registry_mutex);
  const auto it = registry().find(name);
  if (it == registry().end()) {
    throw InputError(detail::concat(kMemoryPrefix, name,
                                    ": no array of that name was provided in this process "
                                    "(io::provide_array)"));
  }
  return std::make_unique<MemorySource>(detail::concat(kMemoryPrefix, name), it->second);
}

}  // namespace noeira::io
