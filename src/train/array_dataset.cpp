#include "train/array_dataset.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "core/hash.hpp"
#include "io/array_spec.hpp"
#include "io/memory_info.hpp"
#include "kernels/error.hpp"

namespace noeira {

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) out += detail::concat(i > 0 ? ", " : "", shape[i]);
  return out + ")";
}

std::filesystem::path existing_file(const std::filesystem::path& file, std::string_view data,
                                    std::string_view expected) {
  if (!std::filesystem::is_regular_file(file)) {
    throw InputError(detail::concat(file.string(), ": no such file (--data ", data, " reads ",
                                    expected, " from --data-dir)"));
  }
  return file;
}

// Every value of `values`, rows first_row... of `a`, finite; `what` names a row's elements in
// messages ("feature", "target").
void check_finite(const io::ArraySource& a, std::int64_t first_row, std::string_view what,
                  std::span<const float> values) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      const auto w = static_cast<std::size_t>(a.row_elements());
      throw InputError(detail::concat(
          a.name(), ": sample ", first_row + static_cast<std::int64_t>(i / w), " holds ",
          values[i], " at ", what, " ", i % w, " (", what, "s must be finite)"));
    }
  }
}

// The first `count` rows in pieces of `piece_rows`, for `visit(first_row, rows)`.
template <class Visit>
void for_each_piece(std::int64_t count, std::int64_t piece_rows, Visit&& visit) {
  for (std::int64_t row = 0; row < count; row += piece_rows) {
    visit(row, std::min(piece_rows, count - row));
  }
}

// The first `count` rows of `a` into `values` as floats, every one finite. Read in pieces of
// about 16 MiB: the file's pages a piece maps (io/npy.hpp) and the conversion buffer HDF5 needs
// for it stay that small beside the result.
void read_finite(const io::ArraySource& a, std::int64_t count, std::string_view what,
                 std::span<float> values) {
  const std::int64_t width = a.row_elements();
  for_each_piece(count, std::max<std::int64_t>(1, (std::int64_t{16} << 20) / (4 * width)),
                 [&](std::int64_t row, std::int64_t rows) {
                   const std::span<float> part =
                       values.subspan(static_cast<std::size_t>(row * width),
                                      static_cast<std::size_t>(rows * width));
                   a.read_rows(row, rows, part);
                   check_finite(a, row, what, part);
                 });
}

// Features read batch by batch rather than held: each row checked finite once, now, in pieces
// of about 1 MiB (so that resident memory does not grow with the data set), and hashed. The hash
// is hash_words of all the features at once, as a held split's (train/run_data.cpp): an even
// number of rows per piece is a whole number of 8-byte words, so the chained pieces are the same
// fold. A checkpoint then resumes whether its run held the features or streamed them.
std::uint64_t check_streamed(const io::ArraySource& x, std::int64_t count) {
  const std::int64_t width = x.row_elements();
  const std::int64_t piece_rows =
      std::max<std::int64_t>(2, (std::int64_t{1} << 20) / (4 * width)) / 2 * 2;
  std::vector<float> buffer(static_cast<std::size_t>(piece_rows * width));
  std::uint64_t hash = hash_words(std::span<const float>());
  for_each_piece(count, piece_rows, [&](std::int64_t row, std::int64_t rows) {
    const std::span<float> part(buffer.data(), static_cast<std::size_t>(rows * width));
    x.read_rows(row, rows, part);
    check_finite(x, row, "feature", part);
    hash = hash_words(std::span<const float>(part), hash);
  });
  return hash;
}

// Whether `count` rows of x are read batch by batch: when asked, when they are in the program's
// memory already (io/memory_array.hpp), or when holding them as floats would take more than a
// quarter of the memory available (a default never fails a run for want of memory; the ranks of
// a node each hold their own copy under MPI).
bool stream_features(const io::ArraySource& x, std::int64_t count, bool asked) {
  return asked || x.in_memory() ||
         4.0 * static_cast<double>(count) * static_cast<double>(x.row_elements()) >
             0.25 * io::memory_available_bytes();
}

// The first `count` labels of `y`, each in [0, int32's largest) (one past it counts the classes).
std::vector<std::int32_t> read_labels(const io::ArraySource& y, std::int64_t count) {
  std::vector<std::int64_t> wide(static_cast<std::size_t>(count));
  y.read_rows(0, count, wide);
  std::vector<std::int32_t> labels(wide.size());
  for (std::size_t i = 0; i < wide.size(); ++i) {
    if (wide[i] < 0 || wide[i] >= std::numeric_limits<std::int32_t>::max()) {
      throw InputError(detail::concat(y.name(), ": sample ", i, " has label ", wide[i],
                                      " (labels are classes 0, 1, 2, ...)"));
    }
    labels[i] = static_cast<std::int32_t>(wide[i]);
  }
  return labels;
}

// The first `count` rows of x as the ids of a model whose first module is an embedding of
// `vocab` rows (core/module.hpp input_vocab_of), each checked in [0, vocab): the kernels that look
// them up on a device do not check again. Read as int64 in pieces, as read_finite reads floats.
Tensor read_ids(const io::ArraySource& x, std::int64_t count, std::int64_t vocab) {
  const std::int64_t width = x.row_elements();
  Tensor ids({count, width}, Target::Cpu, DType::I32);
  std::int32_t* out = ids.ids();
  std::vector<std::int64_t> wide;
  for_each_piece(count, std::max<std::int64_t>(1, (std::int64_t{16} << 20) / (8 * width)),
                 [&](std::int64_t row, std::int64_t rows) {
                   wide.resize(static_cast<std::size_t>(rows * width));
                   x.read_rows(row, rows, std::span(wide));
                   for (std::size_t i = 0; i < wide.size(); ++i) {
                     if (wide[i] < 0 || wide[i] >= vocab) {
                       throw InputError(detail::concat(
                           x.name(), ": sample ", row + static_cast<std::int64_t>(i) / width,
                           " holds id ", wide[i], " at feature ",
                           static_cast<std::int64_t>(i) % width,
                           ", outside the model's vocabulary [0, ", vocab, ")"));
                     }
                     out[row * width + static_cast<std::int64_t>(i)] =
                         static_cast<std::int32_t>(wide[i]);
                   }
                 });
  return ids;
}

// The features of a split: ids for a model that takes them, else floats, held or streamed.
void read_features(Dataset& d, std::shared_ptr<const io::ArraySource> x_source, bool stream,
                   std::int64_t id_vocab) {
  const io::ArraySource& x = *x_source;
  if (id_vocab > 0) {
    if (x.holds_floats()) {
      throw InputError(detail::concat(x.name(), ": float features, but the model's first module "
                                                "is an embedding of ",
                                      id_vocab, " ids (give the ids as an integer array)"));
    }
    if (stream) {
      throw InputError(detail::concat("--stream-data: ", x.name(),
                                      " holds the ids of an embedding, which are held, not "
                                      "streamed"));
    }
    d.values = read_ids(x, d.count, id_vocab);
    return;
  }
  if (stream_features(x, d.count, stream)) {
    d.streamed_hash = check_streamed(x, d.count);
    d.streamed = std::move(x_source);
  } else {
    d.values = Tensor({d.count, d.features}, Target::Cpu);
    read_finite(x, d.count, "feature",
                std::span(d.values.data(), static_cast<std::size_t>(d.values.numel())));
  }
}

}  // namespace

Dataset load_array_split(std::shared_ptr<const io::ArraySource> x_source,
                         const io::ArraySource& y, std::string name, std::int64_t limit,
                         bool stream, std::int64_t id_vocab) {
  const io::ArraySource& x = *x_source;
  if (x.shape().empty() || x.rows() == 0 || x.row_elements() == 0) {
    throw InputError(detail::concat(x.name(), ": shape ", shape_text(x.shape()),
                                    " holds no samples of features (expected [samples, ...])"));
  }
  const bool regression = y.holds_floats();
  if (y.shape().empty() || (!regression && (y.shape().size() > 2 || y.row_elements() != 1)) ||
      (regression && y.row_elements() == 0)) {
    throw InputError(detail::concat(
        y.name(), ": shape ", shape_text(y.shape()),
        regression ? " holds no targets per sample (expected [samples] or [samples, targets])"
                   : " is not one label per sample ([samples] or [samples, 1])"));
  }
  if (y.rows() != x.rows()) {
    throw InputError(detail::concat(y.name(), ": ", y.rows(), " labels for the ", x.rows(),
                                    " samples of ", x.name()));
  }
  Dataset d;
  d.name = std::move(name);
  d.count = apply_limit(d.name, x.rows(), limit);
  d.features = x.row_elements();
  read_features(d, std::move(x_source), stream, id_vocab);
  if (regression) {
    d.target_width = y.row_elements();
    d.targets.resize(static_cast<std::size_t>(d.count * d.target_width));
    read_finite(y, d.count, "target", d.targets);
    return d;
  }
  d.labels = read_labels(y, d.count);
  std::int32_t largest = 0;
  for (const std::int32_t label : d.labels) largest = std::max(largest, label);
  d.num_classes = largest + 1;
  return d;
}

Dataset load_npy_split(const std::filesystem::path& dir, std::string_view split,
                       std::int64_t limit, bool stream, std::int64_t id_vocab) {
  const std::string expected = detail::concat(split, "_x.npy and ", split, "_y.npy");
  std::shared_ptr<const io::ArraySource> x = io::open_npy_source(
      existing_file(dir / detail::concat(split, "_x.npy"), "npy", expected));
  const auto y = io::open_npy_source(
      existing_file(dir / detail::concat(split, "_y.npy"), "npy", expected));
  return load_array_split(std::move(x), *y, detail::concat("npy/", split), limit, stream,
                          id_vocab);
}

Dataset load_named_split(std::string_view x_spec, std::string_view y_spec, std::string_view split,
                         std::int64_t limit, bool stream, std::int64_t id_vocab) {
  for (const auto& [spec, role] : {std::pair{x_spec, "x"}, std::pair{y_spec, "y"}}) {
    if (spec.empty()) {
      throw InputError(detail::concat("--data arrays needs --", split, "-", role, " (the ", split,
                                      role == std::string_view("x") ? " features" : " labels or targets",
                                      ": file.npy, file.npz:x, file.h5:/dataset, or shards joined by commas)"));
    }
  }
  std::shared_ptr<const io::ArraySource> x = io::open_array_spec(x_spec);
  const auto y = io::open_array_spec(y_spec);
  return load_array_split(std::move(x), *y, detail::concat("arrays/", split), limit, stream,
                          id_vocab);
}

Dataset load_h5_split(const std::filesystem::path& dir, std::string_view split,
                      std::int64_t limit, bool stream, std::int64_t id_vocab) {
  const std::filesystem::path file = existing_file(
      dir / detail::concat(split, ".h5"), "h5", detail::concat(split, ".h5 (datasets /x, /y)"));
  std::shared_ptr<const io::ArraySource> x = io::open_h5_source(file, "x");
  const auto y = io::open_h5_source(file, "y");
  return load_array_split(std::move(x), *y, detail::concat("h5/", split), limit, stream,
                          id_vocab);
}

}  // namespace noeira
