#include "distributed/grad_reducer.hpp"

#include <algorithm>

#include "kernels/error.hpp"

namespace noeira::dist {

namespace {
std::span<float> floats(float* data, std::int64_t n) {
  return std::span<float>(data, static_cast<std::size_t>(n));
}
}  // namespace

GradReducer::GradReducer(ParamStore& store, ProcessGroup& group, std::int64_t bucket_elements)
    : store_(store), group_(group), started_(store.unit_count(), false) {
  NOEIRA_CHECK(bucket_elements > 0, "gradient reducer: bucket size must be > 0");
  if (store.residency().state != Extent::Full) return;
  const ShardedLayout& layout = store.layout();
  std::int64_t end = layout.full_size;
  std::int64_t acc = 0;
  for (std::size_t i = layout.first_param.back(); i-- > 0;) {
    acc += layout.units[layout.unit_of(i)].sizes[i - layout.first_param[layout.unit_of(i)]];
    if (acc >= bucket_elements || i == 0) {
      const std::int64_t begin = i == 0 ? 0 : layout.full_offset_of(i);
      buckets_.push_back({Range{begin, end}, layout.unit_of(i)});
      end = begin;
      acc = 0;
    }
  }
}

void GradReducer::before_vjp(std::size_t /*unit*/) {
  if (store_.residency().grads == Extent::Slice) wait_pending();
}

void GradReducer::after_vjp(std::size_t unit) {
  if (store_.residency().state == Extent::Full) {
    launch_ready_buckets(unit);
  } else {
    launch_unit(unit);
  }
  started_[unit] = true;
  // MPI progresses non-blocking collectives only inside MPI calls: poke the ones in flight.
  for (Work& w : pending_) w.is_completed();
}

void GradReducer::launch_ready_buckets(std::size_t finished_unit) {
  float* grads = store_.unit_grads(0);  // the full gradient buffer starts with unit 0
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].lowest_unit >= finished_unit) {
    const Range r = buckets_[next_bucket_++].flat;
    pending_.push_back(group_.allreduce(floats(grads + r.begin, r.size())));
  }
}

void GradReducer::launch_unit(std::size_t unit) {
  const FlatLayout& u = store_.layout().units[unit];
  if (u.padded_size == 0) return;  // a unit without parameters
  // ZeRO-1: in place, the sum of this rank's slice lands where the slice already is; sliced
  // gradients: from the transient buffer into the rank's slice.
  pending_.push_back(group_.reduce_scatter(floats(store_.unit_grads(unit), u.padded_size),
                                           floats(store_.owned_grads(unit), u.shard_size)));
}

void GradReducer::wait_pending() {
  for (Work& w : pending_) w.wait();
  pending_.clear();
}

void GradReducer::finish(Policy policy) {
  if (store_.residency().state == Extent::Full) {
    launch_ready_buckets(0);
  } else {
    for (std::size_t u = store_.unit_count(); u-- > 0;) {
      if (started_[u]) continue;
      // Sliced gradients keep one unit's full gradient at a time: without the per-unit vjp hooks
      // the units overwrote each other's gradients, and nothing can be recovered.
      if (store_.residency().grads == Extent::Slice) {
        throw Error(detail::concat("--policy ", to_string(policy), ": unit ", u,
                                   "'s gradients were not reduced after its vjp; drive backward "
                                   "with dist::vjp_units"));
      }
      launch_unit(u);
    }
  }
  wait_pending();
  next_bucket_ = 0;
  std::fill(started_.begin(), started_.end(), false);
}

}  // namespace noeira::dist
