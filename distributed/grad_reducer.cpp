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
    : store_(store), group_(group), launched_(store.unit_count(), false) {
  NOEIRA_CHECK(bucket_elements > 0, "gradient reducer: bucket size must be > 0");
  if (store.residency().state != Extent::Full) return;
  const ShardedLayout& layout = store.layout();
  std::int64_t end = layout.full_size;
  std::int64_t acc = 0;
  std::size_t final_after = store.unit_count();
  for (std::size_t i = layout.first_param.back(); i-- > 0;) {
    const std::size_t unit = layout.unit_of(i);
    acc += layout.units[unit].sizes[i - layout.first_param[unit]];
    final_after = std::min(final_after, store.reduce_after(unit));
    if (acc >= bucket_elements || i == 0) {
      const std::int64_t begin = i == 0 ? 0 : layout.full_offset_of(i);
      buckets_.push_back({Range{begin, end}, final_after});
      end = begin;
      acc = 0;
      final_after = store.unit_count();
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
    // Highest unit first, as backward finishes them.
    for (std::size_t u = store_.unit_count(); u-- > unit;) {
      if (!launched_[u] && store_.reduce_after(u) == unit) launch_unit(u);
    }
  }
  // MPI progresses non-blocking collectives only inside MPI calls: poke the ones in flight.
  for (Work& w : pending_) w.is_completed();
}

void GradReducer::launch_ready_buckets(std::size_t finished_unit) {
  float* grads = store_.unit_grads(0);  // the full gradient buffer starts with unit 0
  for (Bucket& b : buckets_) {
    if (b.launched || b.final_after < finished_unit) continue;
    b.launched = true;
    pending_.push_back(group_.allreduce(floats(grads + b.flat.begin, b.flat.size())));
  }
}

void GradReducer::launch_unit(std::size_t unit) {
  launched_[unit] = true;
  const FlatLayout& u = store_.layout().units[unit];
  if (u.padded_size == 0) return;  // a unit without parameters
  // Whole gradients (ZeRO-1, a pinned unit): in place, the sum of this rank's slice lands where
  // the slice already is; sliced gradients: from the transient buffer into the rank's slice.
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
      if (launched_[u]) continue;
      // Sliced gradients keep one unit's full gradient at a time: without the per-unit vjp hooks
      // the units overwrote each other's gradients, and nothing can be recovered.
      if (!store_.whole_grads(u)) {
        throw Error(detail::concat("--policy ", to_string(policy), ": unit ", u,
                                   "'s gradients were not reduced after its vjp; drive backward "
                                   "with dist::vjp_units"));
      }
      launch_unit(u);
    }
  }
  wait_pending();
  for (Bucket& b : buckets_) b.launched = false;
  std::fill(launched_.begin(), launched_.end(), false);
}

}  // namespace noeira::dist
