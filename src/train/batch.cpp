#include "train/batch.hpp"

#include <cstring>

#include "kernels/error.hpp"

namespace noeira {

RowRange local_rows(RowRange global, int rank, int world) {
  const RowRange mine = shard_rows(global.size(), rank, world);
  return RowRange{global.begin + mine.begin, global.begin + mine.end};
}

void gather_batch(Batch& out, const Dataset& data, std::span<const std::int32_t> order,
                  RowRange rows) {
  const std::int64_t limit = order.empty() ? data.count : static_cast<std::int64_t>(order.size());
  NOEIRA_CHECK(rows.begin >= 0 && rows.begin <= rows.end && rows.end <= limit, "gather_batch: rows [",
               rows.begin, ", ", rows.end, ") outside the ", limit, " samples of ", data.name);
  const std::int64_t n = rows.size();
  const std::int64_t f = data.features;
  // resize() takes a Shape (a heap vector): skip it on the steady-state path where nothing changes.
  if (out.x.rank() != 2 || out.x.dim(0) != n || out.x.dim(1) != f) out.x.resize({n, f});
  if (out.labels.rank() != 1 || out.labels.dim(0) != n) out.labels.resize({n});
  const bool direct = out.x.target() == Target::Cpu;
  if (!direct) {
    out.host_x.resize(static_cast<std::size_t>(n * f));
    out.host_labels.resize(static_cast<std::size_t>(n));
  }
  float* x = direct ? out.x.data() : out.host_x.data();
  std::int32_t* y = direct ? out.labels.ids() : out.host_labels.data();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t pos = rows.begin + i;
    const std::int64_t sample = order.empty() ? pos : order[static_cast<std::size_t>(pos)];
    std::memcpy(x + i * f, data.images.data() + sample * f, static_cast<std::size_t>(f) * sizeof(float));
    y[i] = data.labels[static_cast<std::size_t>(sample)];
  }
  if (!direct) {
    out.x.copy_from(out.host_x);
    out.labels.copy_from_ids(out.host_labels);
  }
}

}  // namespace noeira
