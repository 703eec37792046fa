#include "train/order.hpp"

#include "kernels/error.hpp"
#include "kernels/philox.hpp"

namespace noeira {

namespace {
// A Philox stream reserved for data order, apart from initialization's (named by parameter hash)
// and dropout's.
constexpr std::uint64_t kOrderStream = 0x6f72646572000000ull;  // "order"

std::uint64_t below(std::uint64_t seed, std::int64_t epoch, std::uint64_t i, std::uint64_t bound) {
  return draw_below(philox::at(seed, kOrderStream + static_cast<std::uint64_t>(epoch), i), bound);
}
}  // namespace

std::uint64_t draw_below(const philox::Block& random, std::uint64_t bound) {
  const std::uint64_t bits = (std::uint64_t{random.v[0]} << 32) | random.v[1];
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(bits) * bound) >> 64);
}

std::vector<std::int32_t> epoch_order(std::uint64_t seed, std::int64_t epoch, std::int64_t n) {
  NOEIRA_CHECK(n >= 0 && n <= INT32_MAX, "epoch_order: sample count ", n, " out of range");
  std::vector<std::int32_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::size_t>(below(seed, epoch, static_cast<std::uint64_t>(i),
                                                  static_cast<std::uint64_t>(i) + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[j]);
  }
  return order;
}

RowRange shard_rows(std::int64_t global_rows, int rank, int world) {
  NOEIRA_CHECK(world >= 1 && rank >= 0 && rank < world, "shard_rows: rank ", rank, " of ", world);
  NOEIRA_CHECK(global_rows >= 0, "shard_rows: negative batch ", global_rows);
  return RowRange{global_rows * rank / world, global_rows * (rank + 1) / world};
}

RowRange rows_to_compute(RowRange mine, RowRange global) {
  if (mine.size() > 0) return mine;
  return RowRange{global.begin, global.begin + 1};
}

void check_batch_covers_ranks(std::int64_t batch, int world, int accum) {
  if (accum > 1 && batch / accum < world) {
    throw AgreedError(detail::concat(
        "--accum ", accum, " splits --batch ", batch, " into micro-batches of ", batch / accum,
        " rows, fewer than the ", world, " ranks: every rank needs a row of each micro-batch (use "
        "--batch ", static_cast<std::int64_t>(accum) * world, " or more, or a smaller --accum)"));
  }
  if (batch < world) {
    throw AgreedError(detail::concat("--batch ", batch, " is smaller than the ", world,
                                     " ranks: every rank needs a row of each batch (use --batch ",
                                     world, " or more)"));
  }
}

RowRange global_batch(std::int64_t step, std::int64_t batch, std::int64_t n) {
  NOEIRA_CHECK(batch > 0 && step >= 0 && step < steps_per_epoch(batch, n), "global_batch: step ",
               step, " of an epoch of ", n, " samples in batches of ", batch);
  const std::int64_t begin = step * batch;  // < n: step < steps_per_epoch
  return RowRange{begin, batch < n - begin ? begin + batch : n};
}

// Rounds up without n + batch - 1, which wraps for a batch near INT64_MAX.
std::int64_t steps_per_epoch(std::int64_t batch, std::int64_t n) {
  return n / batch + (n % batch != 0 ? 1 : 0);
}

}  // namespace noeira
