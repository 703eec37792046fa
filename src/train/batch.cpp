#include "train/batch.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/error.hpp"

namespace noeira {

namespace {

// The labels of `data`, checked against its classes, or its regression targets, on `target`.
// The one check of the labels: the kernels that index with them on a device do not download
// them again (the readers checked them against the format; this checks them against the classes
// the data set declares, whoever built it).
void make_truth_resident(const Dataset& data, Target target, ResidentData& out) {
  if (data.target_width == 0) {
    NOEIRA_CHECK(static_cast<std::int64_t>(data.labels.size()) == data.count &&
                     data.targets.empty(),
                 data.name, ": ", data.labels.size(), " labels for ", data.count, " samples");
    for (std::size_t i = 0; i < data.labels.size(); ++i) {
      if (data.labels[i] < 0 || data.labels[i] >= data.num_classes) {
        throw InputError(detail::concat(data.name, ": label ", data.labels[i], " of sample ", i,
                                        " is outside [0, ", data.num_classes, ")"));
      }
    }
    out.labels = Tensor::from_host_ids({data.count}, data.labels, target);
    return;
  }
  const std::int64_t width = data.target_width;
  NOEIRA_CHECK(width > 0 && static_cast<std::int64_t>(data.targets.size()) == data.count * width &&
                   data.labels.empty(),
               data.name, ": ", data.targets.size(), " targets and ", data.labels.size(),
               " labels for ", data.count, " samples of ", width, " targets");
  // In double, column by column: R² must not lose the spread of targets far from zero.
  std::vector<double> mean(static_cast<std::size_t>(width), 0.0);
  for (std::size_t i = 0; i < data.targets.size(); ++i) mean[i % width] += data.targets[i];
  for (double& m : mean) m /= static_cast<double>(std::max<std::int64_t>(1, data.count));
  double spread = 0.0;
  for (std::size_t i = 0; i < data.targets.size(); ++i) {
    const double d = data.targets[i] - mean[i % width];
    spread += d * d;
  }
  out.target_spread = spread;
  out.targets = Tensor::from_host({data.count, width}, data.targets, target);
}

// Everything of `data` on `target` but the pixels, once the sizes and labels are checked; float
// features are uploaded here (they have no pixels to keep in place).
ResidentData resident_without_pixels(const Dataset& data, Target target) {
  // Streamed features count as held: the source has every row.
  const std::int64_t values = data.streamed ? data.count * data.features
                              : data.values.defined() ? data.values.numel()
                                                      : 0;
  const auto pixels = static_cast<std::int64_t>(data.pixels.size());
  NOEIRA_CHECK(values + pixels == data.count * data.features && (values == 0 || pixels == 0) &&
                   (!data.values.defined() || data.values.target() == Target::Cpu) &&
                   !(data.streamed && data.values.defined()),
               data.name, ": ", pixels, " pixels and ", values, " float features for ",
               data.count, " samples of ", data.features, " features");
  ResidentData out;
  out.name = data.name;
  out.count = data.count;
  out.features = data.features;
  out.num_classes = data.num_classes;
  out.image = data.image;
  if (data.streamed) {
    out.streamed = data.streamed;  // read batch by batch, never held
  } else if (data.float_features() && target == Target::Cpu) {
    out.values = data.values;  // shared: a gather only reads it
  } else if (data.ids()) {
    out.values = Tensor::from_host_ids(
        {data.count, data.features},
        std::span<const std::int32_t>(data.values.ids(), static_cast<std::size_t>(values)),
        target);
  } else if (data.float_features()) {
    out.values = Tensor::from_host(
        {data.count, data.features},
        std::span<const float>(data.values.data(), static_cast<std::size_t>(values)), target);
  } else {
    out.normalization = pixel_normalization(data);
  }
  make_truth_resident(data, target, out);
  return out;
}

// The labels or targets of samples rows.begin.. (file order) as views of the data's.
void view_truth(Batch& out, const ResidentData& data, RowRange rows) {
  const std::int64_t n = rows.size();
  if (data.regression()) {
    const std::int64_t width = data.targets.dim(1);
    out.targets = data.targets.view({n, width}, rows.begin * width);
  } else {
    out.labels = data.labels.view({n}, rows.begin);
  }
  out.views_data = true;
}

// The labels or targets of the `n` samples `index` names into the batch's own storage.
void gather_truth(Batch& out, const ResidentData& data, const std::int32_t* index,
                  std::int64_t n, Stream stream) {
  const Target target = data.target();
  const KernelTable& k = kernels_for(target);
  if (data.regression()) {
    const std::int64_t width = data.targets.dim(1);
    if (out.views_data || !out.targets.defined()) out.targets = Tensor({n, width}, target);
    if (out.targets.dim(0) != n || out.targets.dim(1) != width) {
      out.targets.resize({n, width}, target);
    }
    out.views_data = false;
    k.gather_rows(stream, out.targets.data(), index, data.targets.data(), n, width, data.count);
    return;
  }
  if (out.views_data) {
    out.labels = Tensor({n}, target, DType::I32);
    out.views_data = false;
  }
  if (out.labels.rank() != 1 || out.labels.dim(0) != n) out.labels.resize({n}, target);
  k.gather_rows(stream, out.labels.ids(), index, data.labels.ids(), n, 1, data.count);
}

// Rows of streamed features read from their source into `x` ([n, f] floats on the host): rows
// first.. in file order when `index` is null, else the rows `index` names, each run of
// consecutive rows in one read.
void read_streamed_rows(const io::ArraySource& source, std::int64_t first,
                        const std::int32_t* index, std::int64_t n, std::int64_t f, float* x) {
  if (index == nullptr) {
    source.read_rows(first, n, std::span(x, static_cast<std::size_t>(n * f)));
    return;
  }
  for (std::int64_t i = 0; i < n;) {
    std::int64_t run = 1;
    while (i + run < n && index[i + run] == index[i] + run) ++run;
    source.read_rows(index[i], run, std::span(x + i * f, static_cast<std::size_t>(run * f)));
    i += run;
  }
}

// The features of a batch read from the file (streamed): on the CPU straight into the batch, for
// a device through the batch's host staging and one upload.
void gather_streamed_features(Batch& out, const ResidentData& data, const Tensor& order,
                              RowRange rows, Stream stream) {
  const std::int64_t n = rows.size();
  const std::int64_t f = data.features;
  const Target target = data.target();
  std::vector<std::int32_t> host_index;
  const std::int32_t* index = nullptr;  // the order's positions on the host
  if (order.defined()) {
    if (target == Target::Cpu) {
      index = order.ids() + rows.begin;
    } else {
      host_index = order.view({n}, rows.begin).to_host<std::int32_t>();
      index = host_index.data();
    }
  }
  if (target == Target::Cpu) {
    read_streamed_rows(*data.streamed, rows.begin, index, n, f, out.x.data());
    return;
  }
  out.staging.resize(static_cast<std::size_t>(n * f));
  read_streamed_rows(*data.streamed, rows.begin, index, n, f, out.staging.data());
  kernels_for(target).upload(stream, out.x.data(), out.staging.data(),
                             out.staging.size() * sizeof(float));
}

// The features of a batch of held floats or ids (four bytes each, copied as they are): rows
// copied (file order) or gathered by the order.
void gather_held_features(Batch& out, const ResidentData& data, const Tensor& order,
                          RowRange rows, Stream stream) {
  const std::int64_t n = rows.size();
  const std::int64_t f = data.features;
  const KernelTable& k = kernels_for(data.target());
  static_assert(sizeof(float) == sizeof(std::int32_t));
  const bool ids = data.values.dtype() == DType::I32;
  const void* table = ids ? static_cast<const void*>(data.values.ids()) : data.values.data();
  void* x = ids ? static_cast<void*>(out.x.ids()) : out.x.data();
  if (!order.defined()) {
    k.copy(stream, x, static_cast<const char*>(table) + rows.begin * f * 4,
           static_cast<std::size_t>(n * f) * 4);
  } else {
    k.gather_rows(stream, x, order.ids() + rows.begin, table, n, f, data.count);
  }
}

// The features of a batch of bytes, normalized (and for training augmented where `augment` is
// not null) by the same gather.
void gather_pixel_features(Batch& out, const ResidentData& data, const Tensor& order,
                           RowRange rows, Stream stream, const CropFlip* augment) {
  const std::int64_t n = rows.size();
  const std::int64_t f = data.features;
  const KernelTable& k = kernels_for(data.target());
  const std::uint8_t* table = data.pixels.get();
  if (!order.defined()) {
    // The bytes cannot be viewed as inputs: rows begin.. gathered without an index.
    k.gather_pixels(stream, out.x.data(), nullptr, table + rows.begin * f, n, f,
                    data.count - rows.begin, data.normalization, nullptr);
    return;
  }
  if (augment != nullptr) {
    NOEIRA_CHECK(augment->channels * augment->height * augment->width == f &&
                     augment->channels == data.normalization.channels,
                 "gather_batch: augmenting images of ", augment->channels, "x", augment->height,
                 "x", augment->width, " but ", data.name, " has ", f, " features in ",
                 data.normalization.channels, " channels");
  }
  k.gather_pixels(stream, out.x.data(), order.ids() + rows.begin, table, n, f, data.count,
                  data.normalization, augment);
}

}  // namespace

ResidentData make_resident(const Dataset& data, Target target) {
  ResidentData out = resident_without_pixels(data, target);
  if (data.float_features()) return out;
  auto storage = std::make_shared<Storage>(target, data.pixels.size());
  if (!data.pixels.empty()) {
    kernels_for(target).upload(nullptr, storage->data(), data.pixels.data(), data.pixels.size());
  }
  out.pixels = std::shared_ptr<const std::uint8_t>(
      storage, static_cast<const std::uint8_t*>(storage->data()));
  return out;
}

ResidentData make_resident(Dataset&& data, Target target) {
  if (target != Target::Cpu || data.float_features()) {
    return make_resident(std::as_const(data), target);
  }
  ResidentData out = resident_without_pixels(data, target);
  auto bytes = std::make_shared<const std::vector<std::uint8_t>>(std::move(data.pixels));
  out.pixels = std::shared_ptr<const std::uint8_t>(bytes, bytes->data());
  return out;
}

Tensor resident_order(std::span<const std::int32_t> order, Target target) {
  return Tensor::from_host_ids({static_cast<std::int64_t>(order.size())}, order, target);
}

RowRange local_rows(RowRange global, int rank, int world) {
  const RowRange mine = shard_rows(global.size(), rank, world);
  return RowRange{global.begin + mine.begin, global.begin + mine.end};
}

void gather_batch(Batch& out, const ResidentData& data, const Tensor& order, RowRange rows,
                  Stream stream, const CropFlip* augment) {
  const bool in_order = !order.defined();
  const std::int64_t limit = in_order ? data.count : order.numel();
  NOEIRA_CHECK(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= limit, "gather_batch: rows [",
               rows.begin, ", ", rows.end, ") outside the ", limit, " samples of ", data.name);
  const Target target = data.target();
  NOEIRA_CHECK(in_order || order.target() == target, "gather_batch: the order of ", data.name,
               " is on another target than the data");
  NOEIRA_CHECK(!in_order || augment == nullptr, "gather_batch: ", data.name,
               " augmented in file order (evaluation never augments)");
  const std::int64_t n = rows.size();
  const std::int64_t f = data.features;
  // The ids of a model's embedding, or floats.
  const DType x_type = data.values.defined() ? data.values.dtype() : DType::F32;
  if (out.x.dtype() != x_type) out.x = Tensor({n, f}, target, x_type);
  // resize() takes a Shape (a heap vector): skip it on the steady-state path where nothing changes.
  if (out.x.rank() != 2 || out.x.dim(0) != n || out.x.dim(1) != f) out.x.resize({n, f}, target);
  const bool floats = data.values.defined() || data.streamed;
  NOEIRA_CHECK(!floats || augment == nullptr, "gather_batch: ", data.name,
               " holds float features, which are not images to crop and flip");
  if (data.streamed) {
    gather_streamed_features(out, data, order, rows, stream);
  } else if (floats) {
    gather_held_features(out, data, order, rows, stream);
  } else {
    gather_pixel_features(out, data, order, rows, stream, augment);
  }
  // The labels or targets: views in file order, gathered by the order otherwise.
  if (in_order) {
    view_truth(out, data, rows);
  } else {
    gather_truth(out, data, order.ids() + rows.begin, n, stream);
  }
}

}  // namespace noeira
