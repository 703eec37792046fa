#include "distributed/unit_gatherer.hpp"

#include <chrono>

namespace noeira::dist {

UnitGatherer::UnitGatherer(ParamStore& store, ProcessGroup& group) : store_(store), group_(group) {}

UnitGatherer::~UnitGatherer() = default;

void UnitGatherer::settle() {
  if (!in_flight_) return;
  const auto begin = std::chrono::steady_clock::now();
  in_flight_->wait();
  in_flight_.reset();
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  if (std::uint16_t* staged = store_.staging_buffer(in_flight_buffer_)) {
    store_.kernels().from_bf16(store_.stream(), GradMode::Overwrite,
                               store_.gather_buffer(in_flight_buffer_), staged,
                               store_.layout().units[in_flight_unit_].padded_size);
  }
  store_.set_held(in_flight_buffer_, in_flight_unit_);
  in_flight_unit_ = ParamStore::kNone;
  in_flight_buffer_ = ParamStore::kNone;
}

void UnitGatherer::start(std::size_t unit, std::size_t buffer) {
  const FlatLayout& u = store_.layout().units[unit];
  store_.set_held(buffer, ParamStore::kNone);  // being overwritten
  if (!store_.mixed()) {
    in_flight_.emplace(group_.all_gather(flat_span(store_.owned_values(unit), u.shard_size),
                                         flat_span(store_.gather_buffer(buffer), u.padded_size)));
  } else if (store_.residency().params == Extent::Slice) {
    // Expanded to fp32 by settle().
    in_flight_.emplace(group_.all_gather(flat_span(store_.owned_compute(unit), u.shard_size),
                                         flat_span(store_.staging_buffer(buffer), u.padded_size)));
  } else {
    // Every rank holds the whole bf16 copy: nothing to communicate.
    store_.kernels().from_bf16(store_.stream(), GradMode::Overwrite, store_.gather_buffer(buffer),
                               store_.unit_compute(unit), u.padded_size);
    store_.set_held(buffer, unit);
    return;
  }
  in_flight_unit_ = unit;
  in_flight_buffer_ = buffer;
}

std::size_t UnitGatherer::next_gathered(std::size_t unit, PassDirection direction) const {
  if (direction == PassDirection::Forward) {
    for (std::size_t u = unit + 1; u < store_.unit_count(); ++u) {
      if (!store_.whole_values(u)) return u;
    }
  } else {
    for (std::size_t u = unit; u-- > 0;) {
      if (!store_.whole_values(u)) return u;
    }
  }
  return ParamStore::kNone;
}

void UnitGatherer::acquire(std::size_t unit, PassDirection direction) {
  if (store_.whole_values(unit)) {
    store_.bind_values(unit);
    return;
  }
  // Usually the prefetch of this very unit; otherwise a guess gone wrong, which must land before
  // its buffer can be reused.
  settle();
  const std::size_t buffers = store_.gather_buffers();
  std::size_t buffer = store_.buffer_holding(unit);
  if (buffer == ParamStore::kNone) {
    // Not the buffer of the unit acquired last: a pass that turns (forward into vjp) needs it
    // first.
    buffer = buffers > 1 ? 1 - current_buffer_ : 0;
    start(unit, buffer);
    settle();
  }
  current_buffer_ = buffer;
  store_.bind_values(unit);
  if (buffers < 2) return;
  const std::size_t next = next_gathered(unit, direction);
  if (next != ParamStore::kNone && store_.buffer_holding(next) == ParamStore::kNone) {
    start(next, 1 - buffer);
  }
}

}  // namespace noeira::dist
