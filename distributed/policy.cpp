#include "distributed/policy.hpp"

#include <algorithm>
#include <cmath>

#include "distributed/host_collectives.hpp"
#include "distributed/sharded_step.hpp"
#include "kernels/error.hpp"
#include "optim/clip.hpp"
#include "optim/optimizer.hpp"

namespace noeira::dist {

namespace {

// The checks that must pass before a store adopts anything: a failed one leaves the model as it
// was.
const WalkUnits& checked_walk(Policy policy, const WalkUnits& walk, ProcessGroup& group,
                              const Context& ctx) {
  NOEIRA_CHECK(ctx.k != nullptr, "sharding policy: context without kernels");
  if (group.buffer_target() != ctx.target) {
    throw InputError(detail::concat(
        "--policy ", to_string(policy), ": the model is on ", noeira::to_string(ctx.target),
        " but the ", group.backend(), " process group moves ",
        noeira::to_string(group.buffer_target()),
        " memory (GPU training needs the NCCL backend, or the simulated one on the GPU)"));
  }
  // Otherwise a reduction could read gradients the rank's kernels have not written yet.
  NOEIRA_CHECK(group.ordered_after(ctx.stream), "sharding policy: the ", group.backend(),
               " group orders its collectives after another stream than the model's (make the "
               "group with the context's stream)");
  NOEIRA_CHECK(ctx.grad_mode == GradMode::Overwrite,
               "sharding policy: gradients must be overwritten, not accumulated");
  return walk;
}

}  // namespace

ShardingPolicy::ShardingPolicy(Policy policy, const WalkUnits& walk, ProcessGroup& group,
                               const Context& ctx, const PolicyOptions& options)
    : policy_(policy),
      marked_(walk.marked),
      group_(group),
      store_(checked_walk(policy, walk, group, ctx), residency_of(policy), group.rank(),
             group.size(), ctx, options.alignment, options.persist_below,
             options.prefetch ? 2 : 1, options.param_dtype, &group, options.grad_dtype),
      reducer_(store_, group, options.bucket_elements, options.reduce_dtype),
      gatherer_(store_, group) {}

void ShardingPolicy::check_unit(std::size_t unit, const char* hook) const {
  NOEIRA_CHECK(unit < store_.unit_count(), hook, ": unit ", unit, " of ", store_.unit_count());
}

// --- initial broadcast -----------------------------------------------------------------------

void ShardingPolicy::broadcast_initial_parameters() {
  const std::int64_t full = store_.layout().full_size;
  if (store_.value_extent() == Extent::Full) {
    group_.broadcast(flat_span(store_.full_values(), full), 0).wait();
    // Mixed DDP: the compute copy rounded from the new values (every rank updates them whole,
    // so this communicates nothing).
    if (store_.mixed()) share_updated_values();
    return;
  }
  float* initial = store_.initial_values();
  NOEIRA_CHECK(initial != nullptr, to_string(policy_),
               ": broadcast_initial_parameters after the first step");
  group_.broadcast(flat_span(initial, full), 0).wait();
  store_.take_initial_slices();
}

// --- updated values ----------------------------------------------------------------------------

void ShardingPolicy::share_updated_values() {
  gatherer_.settle();  // no gather may still read the values being rewritten
  const bool sliced_state = store_.residency().state == Extent::Slice;
  std::vector<Work> gathers;
  for (std::size_t u = 0; u < store_.unit_count(); ++u) {
    const FlatLayout& l = store_.layout().units[u];
    if (l.padded_size == 0) continue;
    if (store_.mixed()) store_.round_owned(u);
    if (!sliced_state) continue;
    // Every rank needs the others' updated slices where it holds the unit whole: its fp32
    // values (ZeRO-1/2 in fp32, pinned units under every policy), or the whole bf16 copy of
    // ZeRO-1/2 in mixed precision. ZeRO-3 gathers the other units when they run.
    if (store_.whole_values(u)) {
      float* whole = store_.unit_values(u);
      gathers.push_back(group_.all_gather(flat_span(whole + store_.owned(u).begin, l.shard_size),
                                          flat_span(whole, l.padded_size)));
    } else if (store_.mixed() && store_.residency().params == Extent::Full) {
      gathers.push_back(group_.all_gather(flat_span(store_.owned_compute(u), l.shard_size),
                                          flat_span(store_.unit_compute(u), l.padded_size)));
    }
  }
  for (Work& w : gathers) w.wait();
  store_.forget_gathered();  // ZeRO-3: the gathered copies are stale now
  store_.set_refresh_needed(false);
}

void ShardingPolicy::gather_for_unit(std::size_t unit, PassDirection direction) {
  store_.drop_initial();  // no longer needed once training runs (broadcast or not)
  if (store_.refresh_needed()) share_updated_values();
  gatherer_.acquire(unit, direction);
}

// --- unit hooks ------------------------------------------------------------------------------

void ShardingPolicy::before_forward(std::size_t unit) {
  check_unit(unit, "before_forward");
  if (store_.gathers_values()) gather_for_unit(unit, PassDirection::Forward);
}

void ShardingPolicy::after_forward(std::size_t unit) {
  check_unit(unit, "after_forward");
  // The gather buffer keeps the values until a later gather overwrites it; the handles go now.
  if (store_.gathers_values()) store_.release_values(unit);
}

void ShardingPolicy::before_vjp(std::size_t unit) {
  check_unit(unit, "before_vjp");
  reducer_.before_vjp(unit);
  if (!store_.whole_grads(unit)) store_.bind_grads(unit);  // held whole: always bound
  if (store_.gathers_values()) gather_for_unit(unit, PassDirection::Backward);
}

void ShardingPolicy::after_vjp(std::size_t unit) {
  check_unit(unit, "after_vjp");
  if (store_.gathers_values()) store_.release_values(unit);
  store_.release_grads(unit);  // a no-op for gradients held whole
  reducer_.after_vjp(unit);
}

void ShardingPolicy::reduce_gradients() {
  reducer_.finish(policy_);
  store_.reset_grad_scale();  // new gradients: no clip applies to them yet
}

// --- clipping and the optimizer step ---------------------------------------------------------

double ShardingPolicy::grad_sum_squares() {
  const double local = owned_grad_sum_squares(store_);
  // Every rank holds the whole reduced gradient when it updates everything (DDP).
  if (store_.residency().state == Extent::Full) return local;
  return sum_over_ranks(group_, local);
}

double ShardingPolicy::clip_grad_norm(double max_norm) {
  const double norm = std::sqrt(grad_sum_squares());
  const double factor = clip_coefficient(norm, max_norm);
  if (factor < 1.0) scale_owned_grads(store_, static_cast<float>(factor));
  return norm;
}

void ShardingPolicy::step(Optimizer& optimizer, float lr) {
  NOEIRA_CHECK(reducer_.idle(), "step before reduce_gradients");
  gatherer_.settle();  // the step writes the slices a gather in flight reads
  optimizer_step(store_, optimizer, lr);
  share_updated_values();
}

void ShardingPolicy::allocate_optimizer_state(const Optimizer& optimizer) {
  store_.ensure_state(optimizer.uses_m(), optimizer.uses_v());
}

// --- inspection ------------------------------------------------------------------------------

MemoryReport ShardingPolicy::memory_report() const {
  MemoryReport report = dist::memory_report(store_, policy_, group_.size());
  report.transient_bytes += reducer_.scratch_bytes();
  return report;
}

std::vector<float> ShardingPolicy::full_parameters() {
  const ShardedLayout& layout = store_.layout();
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(layout.numel()));
  std::vector<float> unit_values;
  // Mixed precision: the masters, all-gathered where they are sliced.
  Tensor gathered_masters;
  if (store_.mixed() && store_.value_extent() == Extent::Slice) {
    std::int64_t largest = 1;
    for (const FlatLayout& l : layout.units) largest = std::max(largest, l.padded_size);
    gathered_masters = Tensor({largest}, target());
  }
  for (std::size_t u = 0; u < store_.unit_count(); ++u) {
    const FlatLayout& l = layout.units[u];
    unit_values.assign(static_cast<std::size_t>(l.padded_size), 0.0f);
    if (l.padded_size > 0 && store_.mixed()) {
      const float* masters = store_.owned_values(u);
      if (gathered_masters.defined()) {
        group_.all_gather(flat_span(masters, l.shard_size),
                          flat_span(gathered_masters.data(), l.padded_size))
            .wait();
        masters = gathered_masters.data();
      }
      store_.kernels().download(store_.stream(), unit_values.data(), masters,
                                unit_values.size() * sizeof(float));
    } else if (l.padded_size > 0) {
      if (!store_.whole_values(u)) {
        gatherer_.acquire(u, PassDirection::Forward);
        store_.release_values(u);
      }
      store_.kernels().download(store_.stream(), unit_values.data(), store_.unit_values(u),
                                unit_values.size() * sizeof(float));
    }
    for (std::size_t i = 0; i < l.param_count(); ++i) {
      const auto at = unit_values.begin() + l.offsets[i];
      out.insert(out.end(), at, at + l.sizes[i]);
    }
  }
  return out;
}

}  // namespace noeira::dist
