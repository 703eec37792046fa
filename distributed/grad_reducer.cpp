#include "distributed/grad_reducer.hpp"

#include <algorithm>

#include "distributed/collective_tensor.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

namespace {
// Staging offsets are multiples of this many bf16 elements (64 bytes: a cache line, and the
// alignment the kernels' vector loads like).
constexpr std::int64_t kWireAlignment = 32;

std::int64_t round_up(std::int64_t n, std::int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}
}  // namespace

std::string bf16_grads_accum_refusal(std::int64_t accum) {
  return detail::concat("--grad-dtype bf16 with --accum ", accum,
                        ": the micro-batches' sums would be rounded to bfloat16 at every add; "
                        "accumulate in fp32 gradients (--grad-dtype fp32)");
}

GradReducer::GradReducer(ParamStore& store, ProcessGroup& group, std::int64_t bucket_elements,
                         DType reduce_dtype)
    : store_(store),
      group_(group),
      launched_(store.unit_count(), false),
      rounded_(store.unit_count(), false),
      reduce_dtype_(reduce_dtype) {
  NOEIRA_CHECK(bucket_elements > 0, "gradient reducer: bucket size must be > 0");
  NOEIRA_CHECK(reduce_dtype == DType::F32 || reduce_dtype == DType::BF16,
               "gradient reducer: reductions in fp32 or bf16, not ", to_string(reduce_dtype));
  NOEIRA_CHECK(!store.bf16_grads() || reduce_dtype == DType::BF16,
               "gradient reducer: bf16 gradients are reduced in bf16 (--reduce-dtype bf16)");
  // bf16 gradients held whole are reduced where they are: nothing to stage.
  const bool staged = reduce_dtype == DType::BF16 && !bf16_whole_grads();
  if (staged) {
    // Every reduction of a step in flight at once where the full gradient is kept; two units'
    // where one unit's is (a pinned unit and its first borrower leave together).
    const ShardedLayout& layout = store.layout();
    std::int64_t capacity = 0;
    if (store.residency().grads == Extent::Full) {
      for (const FlatLayout& u : layout.units) capacity += round_up(u.padded_size, kWireAlignment);
    } else {
      for (const FlatLayout& u : layout.units) {
        capacity = std::max(capacity, 2 * round_up(u.padded_size, kWireAlignment));
      }
    }
    wire_ = collective_tensor(group, {std::max<std::int64_t>(1, capacity / 2)}, store.target());
  }
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

GradMode GradReducer::begin_micro_batch(int index, int count) {
  NOEIRA_CHECK(count >= 1 && index >= 0 && index < count, "gradient reducer: micro-batch ", index,
               " of ", count);
  if (count > 1 && store_.bf16_grads()) throw Error(bf16_grads_accum_refusal(count));
  NOEIRA_CHECK(index == micro_index_ + 1 || (index == 0 && idle()),
               "gradient reducer: micro-batch ", index, " after ", micro_index_,
               " (in order, and the step's reductions finished before the next step)");
  const bool full = store_.residency().grads == Extent::Full;
  if (index > 0 && !full) {
    // Every unit must have left with the last micro-batch: its sum is incomplete otherwise.
    for (std::size_t u = 0; u < launched_.size(); ++u) {
      NOEIRA_CHECK(launched_[u], "gradient reducer: unit ", u, " was not reduced in micro-batch ",
                   micro_index_, "; drive backward with dist::vjp_units");
    }
    std::fill(launched_.begin(), launched_.end(), false);
  }
  micro_index_ = index;
  micro_count_ = count;
  if (count > 1 && !full && !scratch_.defined()) {
    std::int64_t largest = 0;
    for (const FlatLayout& u : store_.layout().units) largest = std::max(largest, u.shard_size);
    scratch_.resize({largest}, store_.target());
    pinned_sums_.resize(store_.unit_count());
    for (std::size_t u = 0; u < store_.unit_count(); ++u) {
      if (store_.pinned(u)) {
        pinned_sums_[u].resize({store_.layout().units[u].shard_size}, store_.target());
      }
    }
  }
  return full && index > 0 ? GradMode::Accumulate : GradMode::Overwrite;
}

std::int64_t GradReducer::scratch_bytes() const {
  std::int64_t bytes = scratch_.byte_size() + wire_.byte_size();
  for (const Tensor& t : pinned_sums_) bytes += t.byte_size();
  return bytes;
}

void GradReducer::after_vjp(std::size_t unit) {
  // Full gradients add up locally until the step's last micro-batch.
  if (store_.residency().grads == Extent::Full && !last_micro_batch()) return;
  if (bf16_whole_grads()) round_final(unit);
  if (store_.residency().state == Extent::Full) {
    launch_ready_buckets(unit);
  } else {
    // Highest unit first, as backward finishes them.
    for (std::size_t u = store_.unit_count(); u-- > unit;) {
      if (!launched_[u] && store_.reduce_after(u) == unit) launch_unit(u);
    }
  }
  // MPI progresses non-blocking collectives only inside MPI calls: poke the ones in flight.
  for (Pending& p : pending_) p.work.is_completed();
}

void GradReducer::round_final(std::size_t finished_unit) {
  const KernelTable& k = store_.kernels();
  for (std::size_t u = store_.unit_count(); u-- > finished_unit;) {
    if (rounded_[u] || store_.reduce_after(u) != finished_unit) continue;
    rounded_[u] = true;
    k.to_bf16(store_.stream(), store_.unit_bf16_grads(u), store_.unit_grads(u),
              store_.layout().units[u].padded_size);
  }
}

void GradReducer::launch_ready_buckets(std::size_t finished_unit) {
  for (Bucket& b : buckets_) {
    if (b.launched || b.final_after < finished_unit) continue;
    b.launched = true;
    if (store_.bf16_grads()) {
      // The full bf16 gradient buffer starts with unit 0.
      std::uint16_t* grads = store_.unit_bf16_grads(0) + b.flat.begin;
      reduce_bf16(Collective::AllReduce, grads, b.flat.size(), grads, b.flat.size());
      continue;
    }
    float* grads = store_.unit_grads(0);  // the full gradient buffer starts with unit 0
    reduce(Collective::AllReduce, grads + b.flat.begin, b.flat.size(), grads + b.flat.begin,
           b.flat.size());
  }
}

void GradReducer::launch_unit(std::size_t unit) {
  launched_[unit] = true;
  const FlatLayout& u = store_.layout().units[unit];
  if (u.padded_size == 0) return;  // a unit without parameters
  if (micro_count_ > 1 && store_.residency().grads == Extent::Slice &&
      (micro_index_ > 0 || store_.pinned(unit))) {
    launch_accumulating(unit);
    return;
  }
  if (store_.bf16_grads()) {
    std::uint16_t* owned = store_.owned_bf16_grads(unit);
    if (store_.residency().grads == Extent::Full) {
      // ZeRO-1: in place in the whole bf16 gradient, as below.
      reduce_bf16(Collective::ReduceScatter, store_.unit_bf16_grads(unit), u.padded_size, owned,
                  u.shard_size);
    } else {
      // ZeRO-2/3: the transient (or pinned) fp32 gradient staged in bf16, its sum into the slice.
      std::uint16_t* wire = wire_buffer(u.padded_size);
      store_.kernels().to_bf16(store_.stream(), wire, store_.unit_grads(unit), u.padded_size);
      reduce_bf16(Collective::ReduceScatter, wire, u.padded_size, owned, u.shard_size);
    }
    return;
  }
  // Whole gradients (ZeRO-1, a pinned unit): in place, the sum of this rank's slice lands where
  // the slice already is; sliced gradients: from the transient buffer into the rank's slice.
  reduce(Collective::ReduceScatter, store_.unit_grads(unit), u.padded_size,
         store_.owned_grads(unit), u.shard_size);
}

void GradReducer::reduce_bf16(Collective kind, std::uint16_t* src, std::int64_t src_count,
                              std::uint16_t* dst, std::int64_t dst_count) {
  const std::span<std::uint16_t> in(src, static_cast<std::size_t>(src_count));
  Work work = kind == Collective::AllReduce
                  ? group_.allreduce(in)
                  : group_.reduce_scatter(in, std::span(dst, static_cast<std::size_t>(dst_count)));
  pending_.push_back({std::move(work), {}});
}

void GradReducer::launch_accumulating(std::size_t unit) {
  const FlatLayout& u = store_.layout().units[unit];
  const KernelTable& k = store_.kernels();
  const Stream stream = store_.stream();
  float* owned = store_.owned_grads(unit);
  const std::int64_t n = u.shard_size;
  if (store_.pinned(unit) && micro_index_ == 0) {
    // The first sum of a pinned unit goes straight to its running sum.
    reduce(Collective::ReduceScatter, store_.unit_grads(unit), u.padded_size,
           pinned_sums_[unit].data(), n);
    return;
  }
  // One scratch slice: a unit launched in the same hook as another (a pinned unit and its first
  // borrower) waits for the other's reduction to be added first.
  if (scratch_busy_) wait_pending();
  float* reduced = scratch_.data();
  std::function<void()> then;
  if (!store_.pinned(unit)) {
    then = [&k, stream, owned, reduced, n] { k.accumulate(stream, owned, reduced, n); };
  } else if (!last_micro_batch()) {
    float* sum = pinned_sums_[unit].data();
    then = [&k, stream, sum, reduced, n] { k.accumulate(stream, sum, reduced, n); };
  } else {
    const float* sum = pinned_sums_[unit].data();
    then = [&k, stream, owned, sum, reduced, n] { k.add(stream, owned, sum, reduced, n); };
  }
  reduce(Collective::ReduceScatter, store_.unit_grads(unit), u.padded_size, reduced, n,
         std::move(then));
  scratch_busy_ = true;  // after reduce(), whose wait for staging room may clear it
}

void GradReducer::reduce(Collective kind, float* src, std::int64_t src_count, float* dst,
                         std::int64_t dst_count, std::function<void()> then) {
  const bool all = kind == Collective::AllReduce;
  if (reduce_dtype_ == DType::F32) {
    Work work = all ? group_.allreduce(flat_span(src, src_count))
                    : group_.reduce_scatter(flat_span(src, src_count), flat_span(dst, dst_count));
    pending_.push_back({std::move(work), std::move(then)});
    return;
  }
  const KernelTable& k = store_.kernels();
  const Stream stream = store_.stream();
  std::uint16_t* wire = wire_buffer(src_count);
  k.to_bf16(stream, wire, src, src_count);
  // A reduce-scatter in place: this rank's segment of the staged input receives its sum.
  std::uint16_t* result = all ? wire : wire + group_.rank() * dst_count;
  const std::span<std::uint16_t> staged(wire, static_cast<std::size_t>(src_count));
  Work work = all ? group_.allreduce(staged)
                  : group_.reduce_scatter(staged, staged.subspan(result - wire,
                                                                 static_cast<std::size_t>(dst_count)));
  pending_.push_back({std::move(work), [&k, stream, dst, result, dst_count, then = std::move(then)] {
                        k.from_bf16(stream, GradMode::Overwrite, dst, result, dst_count);
                        if (then) then();
                      }});
}

std::uint16_t* GradReducer::wire_buffer(std::int64_t n) {
  const std::int64_t capacity = wire_.numel() * 2;
  const std::int64_t taken = round_up(n, kWireAlignment);
  if (wire_used_ + taken > capacity) {
    wait_pending();  // the reductions in flight give their staging back
    if (taken > capacity) wire_.resize({(taken + 1) / 2}, store_.target());
  }
  std::uint16_t* p = reinterpret_cast<std::uint16_t*>(wire_.data()) + wire_used_;
  wire_used_ += taken;
  return p;
}

void GradReducer::wait_pending() {
  for (Pending& p : pending_) {
    p.work.wait();
    if (p.then) p.then();
  }
  pending_.clear();
  scratch_busy_ = false;
  wire_used_ = 0;
}

void GradReducer::finish(Policy policy) {
  NOEIRA_CHECK(last_micro_batch(), "reduce_gradients after micro-batch ", micro_index_, " of ",
               micro_count_, ": the step's gradients are not complete yet");
  if (bf16_whole_grads()) {
    // The units share one fp32 buffer: a unit not rounded after its vjp was overwritten.
    for (std::size_t u = 0; u < rounded_.size(); ++u) {
      if (rounded_[u]) continue;
      throw Error(detail::concat("--grad-dtype bf16: unit ", u, "'s gradients were not kept "
                                 "after its vjp; drive backward with dist::vjp_units"));
    }
  }
  std::fill(rounded_.begin(), rounded_.end(), false);
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
  micro_index_ = 0;
  micro_count_ = 1;
}

}  // namespace noeira::dist
