#include "distributed/param_store.hpp"

#include <algorithm>
#include <map>

#include "core/bf16_values.hpp"
#include "distributed/collective_tensor.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

namespace {

constexpr std::int64_t kFloat = sizeof(float);

void copy_floats(const KernelTable& k, Stream s, float* dst, const float* src, std::int64_t n) {
  k.copy(s, dst, src, static_cast<std::size_t>(n * kFloat));
}

}  // namespace

ParamStore::ParamStore(const WalkUnits& walk, Residency residency, int rank, int ranks,
                       const Context& ctx, std::int64_t alignment, std::int64_t persist_below,
                       std::size_t gather_buffers, DType value_dtype, ProcessGroup* group,
                       DType grad_dtype)
    : walk_(walk),
      residency_(residency),
      rank_(rank),
      k_(ctx.k),
      stream_(ctx.stream),
      bf16_grads_(grad_dtype == DType::BF16),
      mixed_(value_dtype == DType::BF16) {
  NOEIRA_CHECK(ctx.k != nullptr, "parameter store: context without kernels");
  NOEIRA_CHECK(gather_buffers >= 1, "parameter store: at least one gather buffer");
  NOEIRA_CHECK(value_dtype == DType::F32 || value_dtype == DType::BF16,
               "parameter store: values in fp32 or bf16, not ", to_string(value_dtype));
  NOEIRA_CHECK(grad_dtype == DType::F32 || grad_dtype == DType::BF16,
               "parameter store: gradients in fp32 or bf16, not ", to_string(grad_dtype));
  std::vector<std::int64_t> sizes;
  for (const NamedParam& p : walk.params) {
    NOEIRA_CHECK(p.param != nullptr && p.param->target() == ctx.target,
                 "parameter store: parameter ", p.name, " is missing or on another target");
    sizes.push_back(p.param->numel());
    decay_.push_back(p.param->decay);
  }
  layout_ = sharded_layout(sizes, walk.unit_params, alignment, ranks);
  const std::size_t units = layout_.unit_count();
  for (std::size_t u = 0; u < units; ++u) pieces_.push_back(layout_.units[u].pieces(owned(u)));

  // Borrows: the owner of every borrowed param must be a later unit (its vjp, earlier in
  // backward, writes the gradient first; the borrowers add to it).
  std::map<const Param*, std::size_t> index_of;
  for (std::size_t i = 0; i < walk.params.size(); ++i) index_of[walk.params[i].param] = i;
  pinned_.assign(units, false);
  reduce_after_.resize(units);
  for (std::size_t u = 0; u < units; ++u) reduce_after_[u] = u;
  for (std::size_t u = 0; u < walk.borrowed.size() && u < units; ++u) {
    for (const Param* p : walk.borrowed[u]) {
      const auto it = index_of.find(p);
      NOEIRA_CHECK(it != index_of.end(), "unit ", u, " borrows a parameter outside the walk");
      const std::size_t owner = layout_.unit_of(it->second);
      if (owner <= u) {
        throw Error(detail::concat("unit ", u, " borrows ", walk.params[it->second].name,
                                   " from unit ", owner,
                                   ": a unit may borrow only from a later unit"));
      }
      pinned_[owner] = true;
      reduce_after_[owner] = std::min(reduce_after_[owner], u);
    }
  }
  if (residency_.params == Extent::Slice) {
    for (std::size_t u = 0; u < units; ++u) {
      const std::int64_t n = layout_.units[u].numel();
      if (n > 0 && n < persist_below) pinned_[u] = true;
    }
  }

  // The buffers the peers' collectives touch in place (reductions' inputs, all-gathers' outputs),
  // in the group's shared memory; every rank allocates the same ones, in this order.
  const auto communicated = [&](std::int64_t size, DType dtype = DType::F32) {
    return group != nullptr ? collective_tensor(*group, {size}, target(), dtype)
                            : Tensor({size}, target(), dtype);
  };

  // Every initial value goes into a full flat buffer: the values themselves, or (sliced values)
  // the initial copy from which this rank's slices are taken.
  const bool sliced_values = value_extent() == Extent::Slice;
  const bool sliced_compute = residency_.params == Extent::Slice;
  Tensor& full = sliced_values ? initial_ : values_;
  full = sliced_values ? Tensor({layout_.full_size}, target()) : communicated(layout_.full_size);
  for (std::size_t i = 0; i < walk.params.size(); ++i) {
    copy_floats(*k_, stream_, full.data() + layout_.full_offset_of(i),
                walk.params[i].param->val.data(), walk.params[i].param->numel());
  }
  pinned_values_.resize(units);
  pinned_grads_.resize(units);
  for (std::size_t u = 0; u < units; ++u) {
    if (!pinned_[u]) continue;
    const std::int64_t size = layout_.units[u].padded_size;
    if (sliced_compute || mixed_) pinned_values_[u] = communicated(size);
    // bf16 gradients are reduced from a bf16 copy: the fp32 one is this rank's alone.
    if (bf16_grads_) {
      pinned_grads_[u] = Tensor({size}, target());
    } else if (residency_.grads == Extent::Slice) {
      pinned_grads_[u] = communicated(size);
    }
  }
  if (gathers_values()) {
    // Expanding a full bf16 copy needs no communication to overlap: one buffer is enough.
    const std::size_t buffers = sliced_compute ? gather_buffers : 1;
    for (std::size_t b = 0; b < buffers; ++b) {
      gathered_.push_back(communicated(largest_unpinned_unit()));
      if (mixed_ && sliced_compute) {
        staged_.push_back(communicated(largest_unpinned_unit(), DType::BF16));
      }
    }
    held_unit_.assign(buffers, kNone);
  }
  if (mixed_) {
    compute_ = communicated(sliced_compute ? layout_.shard_size : layout_.full_size, DType::BF16);
  }
  if (sliced_values) values_ = communicated(layout_.shard_size);
  take_initial_slices_from(full);
  if (bf16_grads_) {
    const bool sliced = residency_.grads == Extent::Slice;
    grads_ = communicated(sliced ? layout_.shard_size : layout_.full_size, DType::BF16);
    std::int64_t transient = largest_unpinned_unit();
    for (std::size_t u = 0; u < units; ++u) transient = std::max(transient, owned(u).size());
    grads_unit_ = Tensor({transient}, target());
  } else if (residency_.grads == Extent::Slice) {
    grads_ = communicated(layout_.shard_size);
    grads_unit_ = communicated(largest_unpinned_unit());
  } else {
    grads_ = communicated(layout_.full_size);
  }
  // The Params' own storage is freed here: from now on they are handles into this store.
  for (std::size_t u = 0; u < units; ++u) {
    if (whole_values(u)) {
      bind_values(u);
    } else {
      release_values(u);
    }
    if (whole_grads(u)) {
      bind_grads(u);
    } else {
      release_grads(u);
    }
  }
}

Range ParamStore::owned(std::size_t unit) const {
  const FlatLayout& u = layout_.units[unit];
  return residency_.state == Extent::Full ? Range{0, u.padded_size} : u.slice(rank_);
}

bool ParamStore::whole_values(std::size_t unit) const {
  return !gathers_values() || pinned_[unit];
}

bool ParamStore::whole_grads(std::size_t unit) const {
  return !transient_grads() || pinned_[unit];
}

float* ParamStore::owned_of(Extent extent, Tensor& buffer, Tensor& pinned, std::size_t unit) {
  if (!buffer.defined()) return nullptr;
  if (extent == Extent::Full) return buffer.data() + layout_.full_offset[unit] + owned(unit).begin;
  // A pinned unit's owned slice lies inside its whole copy (reduced there in place, ZeRO-1 style).
  return pinned_[unit] ? pinned.data() + owned(unit).begin
                       : buffer.data() + layout_.shard_offset[unit];
}

std::size_t ParamStore::buffer_holding(std::size_t unit) const {
  for (std::size_t b = 0; b < held_unit_.size(); ++b) {
    if (held_unit_[b] == unit) return b;
  }
  return kNone;
}

void ParamStore::forget_gathered() { held_unit_.assign(held_unit_.size(), kNone); }

Tensor& ParamStore::values_buffer(std::size_t unit) {
  if (!gathers_values()) return values_;
  if (pinned_[unit]) return pinned_values_[unit];
  const std::size_t b = buffer_holding(unit);
  NOEIRA_CHECK(b != kNone, "parameter store: unit ", unit, " is not gathered (ZeRO-3 values are "
               "read between a unit's hooks)");
  return gathered_[b];
}

float* ParamStore::unit_values(std::size_t unit) {
  Tensor& buffer = values_buffer(unit);
  return buffer.data() + (gathers_values() ? 0 : layout_.full_offset[unit]);
}

float* ParamStore::owned_values(std::size_t unit) {
  // The masters: a pinned unit's owned slice lies with the others (its whole copy is rounded).
  if (mixed_) return owned_in_state(values_, unit);
  return owned_of(residency_.params, values_, pinned_values_[unit], unit);
}

float* ParamStore::full_values() {
  NOEIRA_CHECK(value_extent() == Extent::Full, "parameter store: the values are sliced");
  return values_.data();
}

std::uint16_t* ParamStore::owned_bf16(Tensor& buffer, Extent extent, std::size_t unit) {
  return buffer.as<std::uint16_t>() + (extent == Extent::Slice
                                           ? layout_.shard_offset[unit]
                                           : layout_.full_offset[unit] + owned(unit).begin);
}

std::uint16_t* ParamStore::owned_compute(std::size_t unit) {
  NOEIRA_CHECK(mixed_, "parameter store: no bf16 compute copy without mixed precision");
  return owned_bf16(compute_, residency_.params, unit);
}

std::uint16_t* ParamStore::unit_compute(std::size_t unit) {
  NOEIRA_CHECK(mixed_ && residency_.params == Extent::Full,
               "parameter store: unit ", unit, " has no whole bf16 compute copy here");
  return compute_.as<std::uint16_t>() + layout_.full_offset[unit];
}

void ParamStore::round_owned(std::size_t unit) {
  const std::int64_t n = owned(unit).size();
  std::uint16_t* rounded = owned_compute(unit);
  k_->to_bf16(stream_, rounded, owned_values(unit), n);
  if (pinned_[unit]) {
    k_->from_bf16(stream_, GradMode::Overwrite, pinned_values_[unit].data() + owned(unit).begin,
                  rounded, n);
  }
}

void ParamStore::round_compute_from(const Tensor& full) {
  const bool sliced_compute = residency_.params == Extent::Slice;
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    const std::int64_t size = layout_.units[u].padded_size;
    const float* unit = full.data() + layout_.full_offset[u];
    if (!sliced_compute) {
      k_->to_bf16(stream_, unit_compute(u), unit, size);
    } else {
      k_->to_bf16(stream_, owned_compute(u), unit + owned(u).begin, owned(u).size());
    }
    if (pinned_[u]) round_to_bf16_values(*k_, stream_, pinned_values_[u].data(), unit, size);
  }
  refresh_needed_ = false;
}

std::uint16_t* ParamStore::staging_buffer(std::size_t buffer) {
  return staged_.empty() ? nullptr : staged_[buffer].as<std::uint16_t>();
}

float* ParamStore::unit_grads(std::size_t unit) {
  if (!transient_grads()) return grads_.data() + layout_.full_offset[unit];
  return pinned_[unit] ? pinned_grads_[unit].data() : grads_unit_.data();
}

float* ParamStore::owned_grads(std::size_t unit) {
  NOEIRA_CHECK(!bf16_grads_, "parameter store: the gradients are bf16 (widened_owned_grads)");
  return owned_of(residency_.grads, grads_, pinned_grads_[unit], unit);
}

std::uint16_t* ParamStore::owned_bf16_grads(std::size_t unit) {
  NOEIRA_CHECK(bf16_grads_, "parameter store: the gradients are fp32");
  // Pinned units too: their reduced range lands here, out of their whole fp32 copy.
  return owned_bf16(grads_, residency_.grads, unit);
}

std::uint16_t* ParamStore::unit_bf16_grads(std::size_t unit) {
  NOEIRA_CHECK(bf16_grads_ && residency_.grads == Extent::Full,
               "parameter store: unit ", unit, " has no whole bf16 gradient here");
  return grads_.as<std::uint16_t>() + layout_.full_offset[unit];
}

float* ParamStore::widened_owned_grads(std::size_t unit) {
  if (!bf16_grads_) return owned_grads(unit);
  const std::int64_t n = owned(unit).size();
  float* widened = grads_unit_.data();
  k_->from_bf16(stream_, GradMode::Overwrite, widened, owned_bf16_grads(unit), n);
  if (grad_scale_ != 1.0f) k_->scale(stream_, widened, grad_scale_, n);
  return widened;
}

float* ParamStore::owned_state(State state, std::size_t unit) {
  NOEIRA_CHECK(state != State::Value, "owned_state: values are not optimizer state");
  Tensor& t = state == State::M ? m_ : v_;
  return t.defined() ? owned_in_state(t, unit) : nullptr;
}

float* ParamStore::owned_in_state(Tensor& buffer, std::size_t unit) {
  return buffer.data() + (residency_.state == Extent::Slice ? layout_.shard_offset[unit]
                                                            : layout_.full_offset[unit]);
}

bool ParamStore::has_state(State state) const {
  return (state == State::M ? m_ : v_).defined();
}

void ParamStore::ensure_state(bool m, bool v) {
  const std::int64_t size =
      residency_.state == Extent::Slice ? layout_.shard_size : layout_.full_size;
  if (m && !m_.defined()) m_ = Tensor({size}, target());
  if (v && !v_.defined()) v_ = Tensor({size}, target());
}

// --- handles -----------------------------------------------------------------------------------

void ParamStore::bind(std::size_t unit, bool values) {
  float* base = values ? unit_values(unit) : unit_grads(unit);
  // A view of the buffer the base pointer lies in, at the parameter's offset from it.
  const Tensor& buffer = values ? values_buffer(unit)
                                : (!transient_grads() ? grads_
                                   : pinned_[unit]    ? pinned_grads_[unit]
                                                      : grads_unit_);
  const std::int64_t base_offset = base - buffer.data();
  for (std::size_t i = layout_.first_param[unit]; i < layout_.first_param[unit + 1]; ++i) {
    Param& p = *walk_.params[i].param;
    const std::int64_t local = layout_.full_offset_of(i) - layout_.full_offset[unit];
    (values ? p.val : p.grd) = buffer.view(p.shape(), base_offset + local);
  }
}

void ParamStore::bind_values(std::size_t unit) { bind(unit, true); }

void ParamStore::bind_grads(std::size_t unit) { bind(unit, false); }

void ParamStore::release(std::size_t unit, bool values) {
  if (values ? whole_values(unit) : whole_grads(unit)) return;  // held whole: always readable
  for (std::size_t i = layout_.first_param[unit]; i < layout_.first_param[unit + 1]; ++i) {
    Param& p = *walk_.params[i].param;
    const std::string& name = walk_.params[i].name;
    (values ? p.val : p.grd) = Tensor::absent(
        p.shape(), target(), DType::F32,
        values ? detail::concat("parameter ", name,
                                ": its value is not gathered now (ZeRO-3 and bf16 mixed "
                                "precision hold a unit's values only while the unit runs, "
                                "between its hooks); read parameters through the policy")
               : detail::concat("parameter ", name,
                                ": its gradient exists only during its unit's vjp under ZeRO-2/3 "
                                "and bf16 gradients (a rank keeps the reduced slice, or the "
                                "bf16 copy); drive backward with dist::vjp_units"));
  }
}

void ParamStore::release_values(std::size_t unit) { release(unit, true); }

void ParamStore::release_grads(std::size_t unit) { release(unit, false); }

// --- the initial copy (ZeRO-3) -------------------------------------------------------------------

float* ParamStore::initial_values() { return initial_.defined() ? initial_.data() : nullptr; }

void ParamStore::take_initial_slices() {
  NOEIRA_CHECK(initial_.defined(), "take_initial_slices after training started");
  take_initial_slices_from(initial_);
  initial_ = Tensor();
  forget_gathered();  // gathered from the slices before they were replaced
}

void ParamStore::drop_initial() { initial_ = Tensor(); }

void ParamStore::take_initial_slices_from(const Tensor& full) {
  if (mixed_) round_compute_from(full);
  if (value_extent() == Extent::Full) return;  // the values are the full buffer itself
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    const float* unit = full.data() + layout_.full_offset[u];
    if (pinned_[u] && !mixed_) {
      copy_floats(*k_, stream_, pinned_values_[u].data(), unit, layout_.units[u].padded_size);
    } else {
      copy_floats(*k_, stream_, owned_values(u), unit + owned(u).begin, owned(u).size());
    }
  }
}

// --- checkpoint pieces --------------------------------------------------------------------------

std::vector<HeldPiece> ParamStore::pieces(State state, Coverage coverage) {
  std::vector<HeldPiece> out;
  if (coverage == Coverage::Held) {
    forget_gathered();
    if (state == State::Value) refresh_needed_ = mixed_;
  }
  Tensor& buffer = state == State::Value ? values_ : state == State::M ? m_ : v_;
  if (!buffer.defined()) return out;
  // The masters of mixed precision are held like the optimizer state.
  const bool like_state = state != State::Value || mixed_;
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    const FlatLayout& l = layout_.units[u];
    const bool whole = like_state ? residency_.state == Extent::Full : whole_values(u);
    const Range range = coverage == Coverage::Written || !whole ? l.slice(rank_)
                                                                : Range{0, l.padded_size};
    float* base = nullptr;
    if (!like_state) {
      base = whole ? unit_values(u) + range.begin : owned_values(u);
    } else {
      base = (state == State::Value ? owned_values(u) : owned_state(state, u)) +
             (whole ? range.begin : 0);
    }
    for (const Piece& p : l.pieces(range)) {
      out.push_back({layout_.first_param[u] + p.param, p.param_begin, p.count,
                     base + (p.flat_begin - range.begin)});
    }
  }
  return out;
}

// --- accounting ---------------------------------------------------------------------------------

std::int64_t ParamStore::largest_unpinned_unit() const {
  std::int64_t largest = 0;
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    if (!pinned_[u]) largest = std::max(largest, layout_.units[u].padded_size);
  }
  return largest;
}

std::int64_t ParamStore::pinned_elements() const {
  std::int64_t n = 0;
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    if (pinned_[u]) n += layout_.units[u].numel();
  }
  return n;
}

std::int64_t ParamStore::value_bytes() const {
  std::int64_t n = mixed_ ? compute_.byte_size() : values_.byte_size();
  for (const Tensor& t : gathered_) n += t.byte_size();
  for (const Tensor& t : staged_) n += t.byte_size();
  for (const Tensor& t : pinned_values_) n += t.byte_size();
  return n;
}

std::int64_t ParamStore::grad_bytes() const {
  std::int64_t n = grads_.byte_size();
  for (const Tensor& t : pinned_grads_) n += t.byte_size();
  return n;
}

std::int64_t ParamStore::state_bytes() const {
  return m_.byte_size() + v_.byte_size() + (mixed_ ? values_.byte_size() : 0);
}

std::int64_t ParamStore::transient_bytes() const {
  return grads_unit_.byte_size() + initial_.byte_size();
}

}  // namespace noeira::dist
