#include "distributed/policy.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "distributed/host_collectives.hpp"
#include "kernels/error.hpp"
#include "optim/clip.hpp"
#include "optim/optimizer.hpp"

namespace noeira::dist {

Policy parse_policy(std::string_view name) {
  if (name == "ddp") return Policy::Ddp;
  if (name == "zero1") return Policy::Zero1;
  if (name == "zero2") return Policy::Zero2;
  if (name == "zero3") return Policy::Zero3;
  throw InputError(
      detail::concat("unknown policy '", name, "' (expected ddp, zero1, zero2 or zero3)"));
}

std::string_view to_string(Policy policy) {
  switch (policy) {
    case Policy::Ddp:
      return "ddp";
    case Policy::Zero1:
      return "zero1";
    case Policy::Zero2:
      return "zero2";
    case Policy::Zero3:
      return "zero3";
  }
  return "?";
}

namespace {

constexpr std::int64_t kFloat = sizeof(float);

std::int64_t bytes_of(const Tensor& t) { return t.defined() ? t.numel() * kFloat : 0; }

std::string mib(double bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(3) << bytes / (1024.0 * 1024.0) << " MiB";
  return os.str();
}

}  // namespace

std::string MemoryReport::to_string() const {
  std::ostringstream os;
  os << "rank " << rank << "/" << ranks << " " << dist::to_string(policy) << ": params "
     << mib(static_cast<double>(param_bytes)) << " (formula " << mib(formula_param_bytes)
     << "), grads " << mib(static_cast<double>(grad_bytes)) << " (formula "
     << mib(formula_grad_bytes) << "), optimizer " << mib(static_cast<double>(optimizer_bytes))
     << " (formula " << mib(formula_optimizer_bytes) << "), total "
     << mib(static_cast<double>(total_bytes())) << " (formula " << mib(formula_total_bytes())
     << "), transient " << mib(static_cast<double>(transient_bytes));
  return os.str();
}

// --- construction: take over the walk's storage ----------------------------------------------

ShardingPolicy::ShardingPolicy(Policy policy, const WalkUnits& walk, ProcessGroup& group,
                               const Context& ctx, const PolicyOptions& options)
    : policy_(policy),
      group_(group),
      k_(ctx.k),
      stream_(ctx.stream),
      options_(options) {
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
  NOEIRA_CHECK(options.bucket_elements > 0, "sharding policy: bucket size must be > 0");

  std::vector<std::int64_t> sizes;
  for (const WalkParam& p : walk.params) {
    NOEIRA_CHECK(p.param != nullptr && p.param->target() == ctx.target,
                 "sharding policy: parameter ", p.name, " is missing or on another target");
    sizes.push_back(p.param->numel());
    decay_.push_back(p.param->decay);
  }
  layout_ = sharded_layout(sizes, walk.unit_params, options.alignment, group.size());
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    pieces_.push_back(layout_.units[u].pieces(owned(u)));
  }
  unit_reduced_.assign(layout_.unit_count(), false);

  // Every parameter's value goes into a full flat buffer (ZeRO-3: the initial copy, from which
  // the owned slices are taken), and Param::val / Param::grd become views of policy buffers.
  Tensor& full_values = sharded_params() ? init_full_ : params_full_;
  full_values = Tensor({layout_.full_size}, target());
  for (std::size_t i = 0; i < walk.params.size(); ++i) {
    Param& p = *walk.params[i].param;
    const std::int64_t off = layout_.full_offset_of(i);
    k_->copy(stream_, full_values.data() + off, p.val.data(),
             static_cast<std::size_t>(p.numel() * kFloat));
  }
  if (sharded_params()) {
    params_shard_ = Tensor({layout_.shard_size}, target());
    gathered_ = Tensor({layout_.max_unit_size}, target());
    for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
      k_->copy(stream_, owned_params(u),
               init_full_.data() + layout_.full_offset[u] + owned(u).begin,
               static_cast<std::size_t>(owned(u).size() * kFloat));
    }
  }
  if (sharded_grads()) {
    grads_shard_ = Tensor({layout_.shard_size}, target());
    grads_unit_ = Tensor({layout_.max_unit_size}, target());
  } else {
    grads_full_ = Tensor({layout_.full_size}, target());
  }
  for (std::size_t i = 0; i < walk.params.size(); ++i) {
    Param& p = *walk.params[i].param;
    const std::size_t u = layout_.unit_of(i);
    const std::int64_t full = layout_.full_offset_of(i);
    const std::int64_t local = full - layout_.full_offset[u];
    p.val =
        sharded_params() ? gathered_.view(p.shape(), local) : params_full_.view(p.shape(), full);
    p.grd =
        sharded_grads() ? grads_unit_.view(p.shape(), local) : grads_full_.view(p.shape(), full);
  }

  if (policy_ == Policy::Ddp) {
    // Buckets tile the full gradient buffer from the top down, whole parameters each, so the
    // last layers' gradients (final first in backward) leave first.
    std::int64_t end = layout_.full_size;
    std::int64_t acc = 0;
    for (std::size_t i = walk.params.size(); i-- > 0;) {
      acc += sizes[i];
      if (acc >= options.bucket_elements || i == 0) {
        const std::int64_t begin = i == 0 ? 0 : layout_.full_offset_of(i);
        buckets_.push_back({Range{begin, end}, layout_.unit_of(i)});
        end = begin;
        acc = 0;
      }
    }
  }
}

ShardingPolicy::~ShardingPolicy() = default;

Range ShardingPolicy::owned(std::size_t unit) const {
  const FlatLayout& u = layout_.units[unit];
  return policy_ == Policy::Ddp ? Range{0, u.padded_size} : u.slice(group_.rank());
}

float* ShardingPolicy::owned_params(std::size_t unit) {
  return sharded_params() ? params_shard_.data() + layout_.shard_offset[unit]
                          : params_full_.data() + layout_.full_offset[unit] + owned(unit).begin;
}

float* ShardingPolicy::owned_grads(std::size_t unit) {
  return sharded_grads() ? grads_shard_.data() + layout_.shard_offset[unit]
                         : grads_full_.data() + layout_.full_offset[unit] + owned(unit).begin;
}

std::int64_t ShardingPolicy::state_offset(std::size_t unit) const {
  return sharded_state() ? layout_.shard_offset[unit] : layout_.full_offset[unit];
}

// --- initial broadcast -----------------------------------------------------------------------

void ShardingPolicy::broadcast_initial_parameters() {
  if (!sharded_params()) {
    group_
        .broadcast(
            std::span<float>(params_full_.data(), static_cast<std::size_t>(layout_.full_size)), 0)
        .wait();
    return;
  }
  NOEIRA_CHECK(init_full_.defined(), "zero3: broadcast_initial_parameters after the first step");
  group_
      .broadcast(std::span<float>(init_full_.data(), static_cast<std::size_t>(layout_.full_size)),
                 0)
      .wait();
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    k_->copy(stream_, owned_params(u), init_full_.data() + layout_.full_offset[u] + owned(u).begin,
             static_cast<std::size_t>(owned(u).size() * kFloat));
  }
  init_full_ = Tensor();
  gathered_unit_ = kNone;
}

// --- unit hooks ------------------------------------------------------------------------------

void ShardingPolicy::gather_unit(std::size_t unit) {
  if (gathered_unit_ == unit) return;  // still there (the last unit: forward, loss, then vjp)
  const FlatLayout& u = layout_.units[unit];
  gathered_unit_ = kNone;  // the buffer is being overwritten
  group_
      .all_gather(std::span<const float>(params_shard_.data() + layout_.shard_offset[unit],
                                         static_cast<std::size_t>(u.shard_size)),
                  std::span<float>(gathered_.data(), static_cast<std::size_t>(u.padded_size)))
      .wait();
  gathered_unit_ = unit;
}

void ShardingPolicy::before_forward(std::size_t unit) {
  NOEIRA_CHECK(unit < layout_.unit_count(), "before_forward: unit ", unit, " of ",
               layout_.unit_count());
  if (sharded_params()) {
    // The initial copy is no longer needed once training runs (broadcast or not).
    init_full_ = Tensor();
    gather_unit(unit);
  }
}

void ShardingPolicy::after_forward(std::size_t unit) {
  NOEIRA_CHECK(unit < layout_.unit_count(), "after_forward: unit ", unit, " of ",
               layout_.unit_count());
  // ZeRO-3 releases the unit by letting the next gather overwrite the one gather buffer.
}

void ShardingPolicy::before_vjp(std::size_t unit) {
  NOEIRA_CHECK(unit < layout_.unit_count(), "before_vjp: unit ", unit, " of ",
               layout_.unit_count());
  if (sharded_grads()) {
    // The previous unit's reduce-scatter still reads the transient gradient buffer this vjp is
    // about to overwrite.
    wait_pending();
  }
  if (sharded_params()) gather_unit(unit);
}

void ShardingPolicy::after_vjp(std::size_t unit) {
  NOEIRA_CHECK(unit < layout_.unit_count(), "after_vjp: unit ", unit, " of ", layout_.unit_count());
  if (policy_ == Policy::Ddp) {
    launch_ready_buckets(unit);
  } else {
    launch_unit_reduction(unit);
  }
  unit_reduced_[unit] = true;
  // MPI progresses non-blocking collectives only inside MPI calls: poke the ones in flight.
  poll_pending();
}

void ShardingPolicy::launch_ready_buckets(std::size_t finished_unit) {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].lowest_unit >= finished_unit) {
    const Range r = buckets_[next_bucket_++].flat;
    pending_.push_back(group_.allreduce(
        std::span<float>(grads_full_.data() + r.begin, static_cast<std::size_t>(r.size()))));
  }
}

void ShardingPolicy::launch_unit_reduction(std::size_t unit) {
  const FlatLayout& u = layout_.units[unit];
  if (u.padded_size == 0) return;  // a unit without parameters
  const auto shard = static_cast<std::size_t>(u.shard_size);
  if (policy_ == Policy::Zero1) {
    // In place: the sum of this rank's slice lands where the slice already is.
    float* whole = grads_full_.data() + layout_.full_offset[unit];
    pending_.push_back(group_.reduce_scatter(
        std::span<const float>(whole, static_cast<std::size_t>(u.padded_size)),
        std::span<float>(whole + owned(unit).begin, shard)));
  } else {
    pending_.push_back(group_.reduce_scatter(
        std::span<const float>(grads_unit_.data(), static_cast<std::size_t>(u.padded_size)),
        std::span<float>(owned_grads(unit), shard)));
  }
}

void ShardingPolicy::poll_pending() {
  for (Work& w : pending_) w.is_completed();
}

void ShardingPolicy::wait_pending() {
  for (Work& w : pending_) w.wait();
  pending_.clear();
}

void ShardingPolicy::reduce_gradients() {
  if (policy_ == Policy::Ddp) {
    launch_ready_buckets(0);
  } else {
    for (std::size_t u = layout_.unit_count(); u-- > 0;) {
      if (unit_reduced_[u]) continue;
      // ZeRO-2/3 keep one unit's full gradient at a time: without the per-unit vjp hooks the
      // units overwrote each other's gradients, and nothing can be recovered.
      if (sharded_grads()) {
        throw Error(detail::concat("--policy ", to_string(policy_), ": unit ", u,
                                   "'s gradients were not reduced after its vjp; drive backward "
                                   "with dist::vjp_units"));
      }
      launch_unit_reduction(u);
    }
  }
  wait_pending();
  next_bucket_ = 0;
  std::fill(unit_reduced_.begin(), unit_reduced_.end(), false);
}

// --- clipping and the optimizer step ---------------------------------------------------------

double ShardingPolicy::grad_sum_squares() {
  double local = 0.0;
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    const float* g = owned_grads(u);
    for (const Piece& p : pieces_[u]) {
      local += k_->sum_squares(stream_, g + (p.flat_begin - owned(u).begin), p.count);
    }
  }
  if (policy_ == Policy::Ddp) return local;  // every rank holds the whole reduced gradient
  return sum_over_ranks(group_, local);
}

double ShardingPolicy::clip_grad_norm(double max_norm) {
  const double norm = std::sqrt(grad_sum_squares());
  const double factor = clip_coefficient(norm, max_norm);
  if (factor < 1.0) {
    for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
      k_->scale(stream_, owned_grads(u), static_cast<float>(factor), owned(u).size());
    }
  }
  return norm;
}

void ShardingPolicy::step(Optimizer& optimizer, float lr) {
  NOEIRA_CHECK(pending_.empty(), "step before reduce_gradients");
  allocate_optimizer_state(optimizer);
  init_full_ = Tensor();

  optimizer.begin_step();
  // One fused update per run of pieces that share their decay (all of a unit's pieces when there
  // is no weight decay), across the alignment padding between them: padding holds zeros in
  // values, gradients and moments alike, and every optimizer maps (w, g, m, v) = 0 to 0. On a
  // GPU this is one launch per unit instead of one per parameter.
  const bool decay_matters = optimizer.config().weight_decay != 0.0f;
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    float* w = owned_params(u);
    float* g = owned_grads(u);
    const std::int64_t base = owned(u).begin;
    auto decay_of = [&](const Piece& p) { return decay_[layout_.first_param[u] + p.param]; };
    auto update = [&](std::int64_t begin, std::int64_t end, Decay decay) {
      const std::int64_t at = begin - base;
      const std::int64_t s = state_offset(u) + at;
      optimizer.update(*k_, stream_, w + at, m_.defined() ? m_.data() + s : nullptr,
                       v_.defined() ? v_.data() + s : nullptr, g + at, end - begin, decay, lr);
    };
    const std::vector<Piece>& pieces = pieces_[u];
    std::size_t first = 0;
    for (std::size_t i = 1; i <= pieces.size(); ++i) {
      if (i < pieces.size() && (!decay_matters || decay_of(pieces[i]) == decay_of(pieces[first]))) {
        continue;
      }
      const Piece& last = pieces[i - 1];
      update(pieces[first].flat_begin, last.flat_begin + last.count, decay_of(pieces[first]));
      first = i;
    }
  }

  if (policy_ == Policy::Zero1 || policy_ == Policy::Zero2) {
    // Every rank needs every updated parameter for the next forward.
    for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
      const FlatLayout& l = layout_.units[u];
      if (l.padded_size == 0) continue;
      float* whole = params_full_.data() + layout_.full_offset[u];
      pending_.push_back(group_.all_gather(
          std::span<const float>(whole + owned(u).begin, static_cast<std::size_t>(l.shard_size)),
          std::span<float>(whole, static_cast<std::size_t>(l.padded_size))));
    }
    wait_pending();
  }
  gathered_unit_ = kNone;  // ZeRO-3: the gathered copy is stale now
}

// --- checkpoint access -----------------------------------------------------------------------

void ShardingPolicy::allocate_optimizer_state(const Optimizer& optimizer) {
  const std::int64_t state_size = sharded_state() ? layout_.shard_size : layout_.full_size;
  if (optimizer.uses_m() && !m_.defined()) m_ = Tensor({state_size}, target());
  if (optimizer.uses_v() && !v_.defined()) v_ = Tensor({state_size}, target());
}

std::vector<ShardingPolicy::HeldPiece> ShardingPolicy::slice_pieces(State state) {
  std::vector<HeldPiece> out;
  Tensor& moments = state == State::M ? m_ : v_;
  if (state != State::Value && !moments.defined()) return out;
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    const Range slice = layout_.units[u].slice(group_.rank());
    const bool in_shard = state == State::Value ? sharded_params() : sharded_state();
    float* base = nullptr;
    if (state == State::Value) {
      base = in_shard ? params_shard_.data() + layout_.shard_offset[u]
                      : params_full_.data() + layout_.full_offset[u] + slice.begin;
    } else {
      base = moments.data() +
             (in_shard ? layout_.shard_offset[u] : layout_.full_offset[u] + slice.begin);
    }
    for (const Piece& p : layout_.units[u].pieces(slice)) {
      out.push_back({layout_.first_param[u] + p.param, p.param_begin, p.count,
                     base + (p.flat_begin - slice.begin)});
    }
  }
  return out;
}

std::vector<ShardingPolicy::HeldPiece> ShardingPolicy::held_pieces(State state) {
  gathered_unit_ = kNone;
  std::vector<HeldPiece> out;
  Tensor& moments = state == State::M ? m_ : v_;
  if (state != State::Value && !moments.defined()) return out;
  const bool sharded = state == State::Value ? sharded_params() : sharded_state();
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    const FlatLayout& l = layout_.units[u];
    const Range range = sharded ? l.slice(group_.rank()) : Range{0, l.padded_size};
    float* base = nullptr;
    if (state == State::Value) {
      base = sharded ? params_shard_.data() + layout_.shard_offset[u]
                     : params_full_.data() + layout_.full_offset[u];
    } else {
      base = moments.data() +
             (sharded ? layout_.shard_offset[u] : layout_.full_offset[u]);
    }
    for (const Piece& p : l.pieces(range)) {
      out.push_back({layout_.first_param[u] + p.param, p.param_begin, p.count,
                     base + (p.flat_begin - range.begin)});
    }
  }
  return out;
}

// --- inspection ------------------------------------------------------------------------------

std::vector<float> ShardingPolicy::full_parameters() {
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(layout_.numel()));
  std::vector<float> unit_values;
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    const FlatLayout& l = layout_.units[u];
    unit_values.assign(static_cast<std::size_t>(l.padded_size), 0.0f);
    if (l.padded_size > 0) {
      const float* whole = nullptr;
      if (sharded_params()) {
        gather_unit(u);
        whole = gathered_.data();
      } else {
        whole = params_full_.data() + layout_.full_offset[u];
      }
      k_->download(stream_, unit_values.data(), whole,
                   static_cast<std::size_t>(l.padded_size) * sizeof(float));
    }
    for (std::size_t i = 0; i < l.param_count(); ++i) {
      const auto at = unit_values.begin() + l.offsets[i];
      out.insert(out.end(), at, at + l.sizes[i]);
    }
  }
  return out;
}

MemoryReport ShardingPolicy::memory_report() const {
  MemoryReport r;
  r.policy = policy_;
  r.rank = group_.rank();
  r.ranks = group_.size();
  r.numel = layout_.numel();
  r.param_bytes = bytes_of(params_full_) + bytes_of(params_shard_) + bytes_of(gathered_);
  r.grad_bytes = bytes_of(grads_full_) + bytes_of(grads_shard_);
  r.optimizer_bytes = bytes_of(m_) + bytes_of(v_);
  r.transient_bytes = bytes_of(grads_unit_) + bytes_of(init_full_);
  const double psi = static_cast<double>(r.numel) * kFloat;
  const double n = static_cast<double>(r.ranks);
  const double state_buffers = (m_.defined() ? 1.0 : 0.0) + (v_.defined() ? 1.0 : 0.0);
  switch (policy_) {
    case Policy::Ddp:
      r.formula_param_bytes = psi;
      r.formula_grad_bytes = psi;
      r.formula_optimizer_bytes = state_buffers * psi;
      break;
    case Policy::Zero1:
      r.formula_param_bytes = psi;
      r.formula_grad_bytes = psi;
      r.formula_optimizer_bytes = state_buffers * psi / n;
      break;
    case Policy::Zero2:
      r.formula_param_bytes = psi;
      r.formula_grad_bytes = psi / n;
      r.formula_optimizer_bytes = state_buffers * psi / n;
      break;
    case Policy::Zero3:
      r.formula_param_bytes = psi / n + static_cast<double>(layout_.max_unit_numel()) * kFloat;
      r.formula_grad_bytes = psi / n;
      r.formula_optimizer_bytes = state_buffers * psi / n;
      break;
  }
  return r;
}

}  // namespace noeira::dist
