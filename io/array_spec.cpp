#include "io/array_spec.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "io/memory_array.hpp"
#include "io/npz.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

namespace {

bool ends_with_any(std::string_view s, std::initializer_list<std::string_view> endings) {
  return std::ranges::any_of(endings, [&](std::string_view e) { return s.ends_with(e); });
}

constexpr std::string_view kForms =
    "(file.npy, file.npz:x, file.h5:/path/to/dataset, or memory:NAME)";

std::unique_ptr<ArraySource> open_one(std::string_view spec) {
  if (spec.empty()) throw InputError(detail::concat("an empty array name ", kForms));
  if (spec.starts_with(kMemoryPrefix)) return open_memory_source(spec.substr(kMemoryPrefix.size()));
  // The last ':' after an HDF5 file's name starts the dataset's path; a ':' elsewhere is the
  // file name's own.
  const std::size_t colon = spec.rfind(':');
  if (colon != std::string_view::npos &&
      ends_with_any(spec.substr(0, colon), {".h5", ".hdf5", ".he5"})) {
    std::string_view dataset = spec.substr(colon + 1);
    while (dataset.starts_with('/')) dataset.remove_prefix(1);
    if (dataset.empty()) {
      throw InputError(detail::concat(spec, ": names no dataset in the file ", kForms));
    }
    return open_h5_source(std::string(spec.substr(0, colon)), std::string(dataset));
  }
  if (ends_with_any(spec, {".h5", ".hdf5", ".he5"})) {
    throw InputError(detail::concat(spec, ": an HDF5 file holds many arrays; name the dataset, as ",
                                    spec, ":/x"));
  }
  if (spec.ends_with(".npy")) return open_npy_source(std::string(spec));
  // An .npz archive's array by its name, or its only one.
  if (colon != std::string_view::npos && spec.substr(0, colon).ends_with(".npz")) {
    const std::string_view member = spec.substr(colon + 1);
    if (member.empty()) throw InputError(detail::concat(spec, ": names no array in the archive"));
    return open_npz_source(std::string(spec.substr(0, colon)), std::string(member));
  }
  if (spec.ends_with(".npz")) return open_npz_source(std::string(spec), "");
  throw InputError(detail::concat(spec, ": not an array file noeira reads ", kForms));
}

// Shards read as one array: the rows of each in turn.
class ShardedSource final : public ArraySource {
 public:
  ShardedSource(std::string name, std::vector<std::int64_t> shape,
                std::vector<std::unique_ptr<ArraySource>> shards)
      : ArraySource(std::move(name), std::move(shape)), shards_(std::move(shards)) {}

  bool holds_floats() const override { return shards_.front()->holds_floats(); }
  bool in_memory() const override {
    return std::ranges::all_of(shards_, [](const auto& s) { return s->in_memory(); });
  }
  void read_rows(std::int64_t begin, std::int64_t count, std::span<float> out) const override {
    read(begin, count, out);
  }
  void read_rows(std::int64_t begin, std::int64_t count,
                 std::span<std::int64_t> out) const override {
    read(begin, count, out);
  }

 private:
  template <class T>
  void read(std::int64_t begin, std::int64_t count, std::span<T> out) const {
    if (begin < 0 || count < 0 || begin + count > rows()) {
      throw InputError(detail::concat(name(), ": rows ", begin, " to ", begin + count,
                                      " asked of ", rows()));
    }
    const std::int64_t width = row_elements();
    std::int64_t first = 0;  // the first row of the shard at hand
    for (const auto& shard : shards_) {
      const std::int64_t from = std::max(begin, first);
      const std::int64_t to = std::min(begin + count, first + shard->rows());
      if (from < to) {
        shard->read_rows(from - first, to - from,
                         out.subspan(static_cast<std::size_t>((from - begin) * width),
                                     static_cast<std::size_t>((to - from) * width)));
      }
      first += shard->rows();
    }
  }

  std::vector<std::unique_ptr<ArraySource>> shards_;
};

std::string row_shape_text(const ArraySource& a) {
  std::string out = "[rows";
  for (std::size_t i = 1; i < a.shape().size(); ++i) out += detail::concat(", ", a.shape()[i]);
  return out + "]";
}

}  // namespace

std::unique_ptr<ArraySource> open_array_spec(std::string_view spec) {
  if (spec.find(',') == std::string_view::npos) return open_one(spec);
  std::vector<std::unique_ptr<ArraySource>> shards;
  std::int64_t rows = 0;
  for (std::size_t at = 0; at <= spec.size();) {
    const std::size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string_view part = spec.substr(at, comma - at);
    if (part.empty()) {
      throw InputError(detail::concat(spec, ": shard ", shards.size() + 1,
                                      " of the list is empty (shards are joined by single commas)"));
    }
    shards.push_back(open_one(part));
    const ArraySource& s = *shards.back();
    const ArraySource& lead = *shards.front();
    if (s.shape().empty()) {
      throw InputError(detail::concat(s.name(), ": a 0-d array cannot be a shard of rows"));
    }
    if (!std::equal(s.shape().begin() + 1, s.shape().end(), lead.shape().begin() + 1,
                    lead.shape().end())) {
      throw InputError(detail::concat(s.name(), ": rows of shape ", row_shape_text(s),
                                      " beside shard ", lead.name(), "'s ",
                                      row_shape_text(lead), " (shards join their rows)"));
    }
    if (s.holds_floats() != lead.holds_floats()) {
      throw InputError(detail::concat(s.name(), ": holds ", s.holds_floats() ? "floats" : "integers",
                                      " beside shard ", lead.name(), "'s ",
                                      lead.holds_floats() ? "floats" : "integers"));
    }
    rows += s.rows();
    at = comma + 1;
  }
  std::vector<std::int64_t> shape = shards.front()->shape();
  shape.front() = rows;
  return std::make_unique<ShardedSource>(std::string(spec), std::move(shape), std::move(shards));
}

}  // namespace noeira::io
