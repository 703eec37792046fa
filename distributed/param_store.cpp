#include "distributed/param_store.hpp"

#include "kernels/error.hpp"

namespace noeira::dist {

namespace {

constexpr std::int64_t kFloat = sizeof(float);

std::int64_t bytes_of(const Tensor& t) { return t.defined() ? t.numel() * kFloat : 0; }

void copy_floats(const KernelTable& k, Stream s, float* dst, const float* src, std::int64_t n) {
  k.copy(s, dst, src, static_cast<std::size_t>(n * kFloat));
}

}  // namespace

ParamStore::ParamStore(const WalkUnits& walk, Residency residency, int rank, int ranks,
                       const Context& ctx, std::int64_t alignment)
    : walk_(walk), residency_(residency), rank_(rank), k_(ctx.k), stream_(ctx.stream) {
  NOEIRA_CHECK(ctx.k != nullptr, "parameter store: context without kernels");
  std::vector<std::int64_t> sizes;
  for (const WalkParam& p : walk.params) {
    NOEIRA_CHECK(p.param != nullptr && p.param->target() == ctx.target,
                 "parameter store: parameter ", p.name, " is missing or on another target");
    sizes.push_back(p.param->numel());
    decay_.push_back(p.param->decay);
  }
  layout_ = sharded_layout(sizes, walk.unit_params, alignment, ranks);
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    pieces_.push_back(layout_.units[u].pieces(owned(u)));
  }

  // Every initial value goes into a full flat buffer: the values themselves, or (sliced values)
  // the initial copy from which this rank's slices are taken.
  const bool sliced_values = residency_.params == Extent::Slice;
  Tensor& full = sliced_values ? initial_ : values_;
  full = Tensor({layout_.full_size}, target());
  for (std::size_t i = 0; i < walk.params.size(); ++i) {
    copy_floats(*k_, stream_, full.data() + layout_.full_offset_of(i),
                walk.params[i].param->val.data(), walk.params[i].param->numel());
  }
  if (sliced_values) {
    values_ = Tensor({layout_.shard_size}, target());
    gathered_ = Tensor({layout_.max_unit_size}, target());
    take_initial_slices_from(initial_);
  }
  if (residency_.grads == Extent::Slice) {
    grads_ = Tensor({layout_.shard_size}, target());
    grads_unit_ = Tensor({layout_.max_unit_size}, target());
  } else {
    grads_ = Tensor({layout_.full_size}, target());
  }
  // The Params' own storage is freed here: from now on they are handles into this store.
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    if (sliced_values) {
      release_values(u);
    } else {
      bind_values(u);
    }
    if (residency_.grads == Extent::Slice) {
      release_grads(u);
    } else {
      bind_grads(u);
    }
  }
}

Range ParamStore::owned(std::size_t unit) const {
  const FlatLayout& u = layout_.units[unit];
  return residency_.state == Extent::Full ? Range{0, u.padded_size} : u.slice(rank_);
}

float* ParamStore::whole_of(Extent extent, Tensor& buffer, Tensor& transient, std::size_t unit) {
  return extent == Extent::Slice ? transient.data() : buffer.data() + layout_.full_offset[unit];
}

float* ParamStore::owned_of(Extent extent, Tensor& buffer, std::size_t unit) {
  if (!buffer.defined()) return nullptr;
  return extent == Extent::Slice
             ? buffer.data() + layout_.shard_offset[unit]
             : buffer.data() + layout_.full_offset[unit] + owned(unit).begin;
}

float* ParamStore::unit_values(std::size_t unit) {
  return whole_of(residency_.params, values_, gathered_, unit);
}

float* ParamStore::owned_values(std::size_t unit) {
  return owned_of(residency_.params, values_, unit);
}

float* ParamStore::unit_grads(std::size_t unit) {
  return whole_of(residency_.grads, grads_, grads_unit_, unit);
}

float* ParamStore::owned_grads(std::size_t unit) {
  return owned_of(residency_.grads, grads_, unit);
}

float* ParamStore::owned_state(State state, std::size_t unit) {
  NOEIRA_CHECK(state != State::Value, "owned_state: values are not optimizer state");
  return owned_of(residency_.state, state == State::M ? m_ : v_, unit);
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
  const std::size_t first = layout_.first_param[unit];
  for (std::size_t i = first; i < layout_.first_param[unit + 1]; ++i) {
    Param& p = *walk_.params[i].param;
    const std::int64_t full = layout_.full_offset_of(i);
    const std::int64_t local = full - layout_.full_offset[unit];
    if (values) {
      p.val = residency_.params == Extent::Slice ? gathered_.view(p.shape(), local)
                                                 : values_.view(p.shape(), full);
    } else {
      p.grd = residency_.grads == Extent::Slice ? grads_unit_.view(p.shape(), local)
                                                : grads_.view(p.shape(), full);
    }
  }
}

void ParamStore::bind_values(std::size_t unit) { bind(unit, true); }

void ParamStore::bind_grads(std::size_t unit) { bind(unit, false); }

void ParamStore::release_values(std::size_t unit) {
  for (std::size_t i = layout_.first_param[unit]; i < layout_.first_param[unit + 1]; ++i) {
    Param& p = *walk_.params[i].param;
    p.val = Tensor::absent(
        p.shape(), target(), DType::F32,
        detail::concat("parameter ", walk_.params[i].name,
                       ": its value is not gathered now (ZeRO-3 holds a unit's values only while "
                       "the unit runs, between its hooks); read parameters through the policy"));
  }
}

void ParamStore::release_grads(std::size_t unit) {
  for (std::size_t i = layout_.first_param[unit]; i < layout_.first_param[unit + 1]; ++i) {
    Param& p = *walk_.params[i].param;
    p.grd = Tensor::absent(
        p.shape(), target(), DType::F32,
        detail::concat("parameter ", walk_.params[i].name,
                       ": its gradient exists only during its unit's vjp under ZeRO-2/3 (a rank "
                       "keeps the reduced slice); drive backward with dist::vjp_units"));
  }
}

// --- the initial copy (ZeRO-3) -------------------------------------------------------------------

float* ParamStore::initial_values() { return initial_.defined() ? initial_.data() : nullptr; }

void ParamStore::take_initial_slices() {
  NOEIRA_CHECK(initial_.defined(), "take_initial_slices after training started");
  take_initial_slices_from(initial_);
  initial_ = Tensor();
  gathered_unit_ = kNone;  // gathered from the slices before they were replaced
}

void ParamStore::drop_initial() { initial_ = Tensor(); }

void ParamStore::take_initial_slices_from(const Tensor& full) {
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    copy_floats(*k_, stream_, owned_values(u),
                full.data() + layout_.full_offset[u] + owned(u).begin, owned(u).size());
  }
}

// --- checkpoint pieces --------------------------------------------------------------------------

std::vector<HeldPiece> ParamStore::pieces(State state, Coverage coverage) {
  std::vector<HeldPiece> out;
  if (coverage == Coverage::Held) gathered_unit_ = kNone;
  Tensor& buffer = state == State::Value ? values_ : state == State::M ? m_ : v_;
  if (!buffer.defined()) return out;
  const Extent extent = state == State::Value ? residency_.params : residency_.state;
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    const FlatLayout& l = layout_.units[u];
    const Range range = coverage == Coverage::Written || extent == Extent::Slice
                            ? l.slice(rank_)
                            : Range{0, l.padded_size};
    float* base = extent == Extent::Slice
                      ? buffer.data() + layout_.shard_offset[u]
                      : buffer.data() + layout_.full_offset[u] + range.begin;
    for (const Piece& p : l.pieces(range)) {
      out.push_back({layout_.first_param[u] + p.param, p.param_begin, p.count,
                     base + (p.flat_begin - range.begin)});
    }
  }
  return out;
}

// --- accounting ---------------------------------------------------------------------------------

std::int64_t ParamStore::value_bytes() const { return bytes_of(values_) + bytes_of(gathered_); }
std::int64_t ParamStore::grad_bytes() const { return bytes_of(grads_); }
std::int64_t ParamStore::state_bytes() const { return bytes_of(m_) + bytes_of(v_); }
std::int64_t ParamStore::transient_bytes() const {
  return bytes_of(grads_unit_) + bytes_of(initial_);
}

}  // namespace noeira::dist
