#include "optim/optimizer.hpp"

#include <cmath>

#include "kernels/error.hpp"

namespace noeira {

OptimizerKind parse_optimizer_kind(std::string_view name) { return kOptimizerNames.parse(name); }

std::string_view to_string(OptimizerKind kind) { return kOptimizerNames.name_of(kind); }

namespace {

void require(bool ok, std::string_view field, float value, std::string_view range) {
  if (!ok) {
    throw InputError(detail::concat("optimizer: ", field, " = ", value, " is outside ", range));
  }
}

}  // namespace

Optimizer::Optimizer(OptimizerConfig config) : config_(config) {
  const OptimizerConfig& c = config_;
  require(std::isfinite(c.lr) && c.lr >= 0.0f, "lr", c.lr, "[0, inf)");
  require(std::isfinite(c.weight_decay) && c.weight_decay >= 0.0f, "weight_decay",
          c.weight_decay, "[0, inf)");
  if (c.kind == OptimizerKind::Sgd) {
    require(std::isfinite(c.momentum) && c.momentum >= 0.0f, "momentum", c.momentum, "[0, inf)");
    if (c.nesterov && c.momentum == 0.0f) {
      throw InputError("optimizer: nesterov needs momentum > 0");
    }
  } else {
    require(c.beta1 >= 0.0f && c.beta1 < 1.0f, "beta1", c.beta1, "[0, 1)");
    require(c.beta2 >= 0.0f && c.beta2 < 1.0f, "beta2", c.beta2, "[0, 1)");
    require(std::isfinite(c.eps) && c.eps > 0.0f, "eps", c.eps, "(0, inf)");
  }
}

void Optimizer::begin_step() {
  state_.t += 1;
  state_.beta1_pow *= static_cast<double>(config_.beta1);
  state_.beta2_pow *= static_cast<double>(config_.beta2);
}

void Optimizer::set_state(const OptimizerState& state) {
  // Zero is the power of a beta of 0 (--beta1 0: no momentum), or of a small beta that
  // underflowed (0.5^t from t = 1,075 on): a valid run's state, not a damaged one.
  const bool pows_ok = state.beta1_pow >= 0.0 && state.beta1_pow <= 1.0 &&
                       state.beta2_pow >= 0.0 && state.beta2_pow <= 1.0;
  if (state.t < 0 || !pows_ok || (state.t == 0 && (state.beta1_pow != 1.0 ||
                                                     state.beta2_pow != 1.0))) {
    throw InputError(detail::concat("optimizer: invalid step state t = ", state.t,
                                    ", beta1^t = ", state.beta1_pow, ", beta2^t = ",
                                    state.beta2_pow));
  }
  state_ = state;
}

bool Optimizer::uses_m() const {
  return config_.kind != OptimizerKind::Sgd || config_.momentum != 0.0f;
}

bool Optimizer::uses_v() const { return config_.kind != OptimizerKind::Sgd; }

SgdHyper Optimizer::sgd_hyper(Decay decay, float lr) const {
  SgdHyper h;
  h.lr = lr;
  h.momentum = config_.momentum;
  h.weight_decay = decay == Decay::Apply ? config_.weight_decay : 0.0f;
  h.nesterov = config_.nesterov;
  return h;
}

AdamHyper Optimizer::adam_hyper(Decay decay, float lr) const {
  NOEIRA_CHECK(state_.t > 0, "Adam update before the first begin_step()");
  AdamHyper h;
  h.lr = lr;
  h.beta1 = config_.beta1;
  h.beta2 = config_.beta2;
  h.eps = config_.eps;
  h.weight_decay = decay == Decay::Apply ? config_.weight_decay : 0.0f;
  h.decoupled = config_.kind == OptimizerKind::AdamW;
  // In double, from the stored powers: the same bits after a resume as in an unbroken run.
  h.bias_correction1 = static_cast<float>(1.0 - state_.beta1_pow);
  h.bias_correction2 = static_cast<float>(1.0 - state_.beta2_pow);
  return h;
}

void Optimizer::update(const KernelTable& k, Stream s, float* w, float* m, float* v,
                       const float* g, std::int64_t n, Decay decay, float lr) const {
  if (n == 0) return;
  NOEIRA_CHECK(w != nullptr && g != nullptr, "optimizer update without weights or gradient");
  NOEIRA_CHECK(!uses_m() || m != nullptr, to_string(config_.kind),
               " update needs its first-moment buffer");
  NOEIRA_CHECK(!uses_v() || v != nullptr, to_string(config_.kind),
               " update needs its second-moment buffer");
  if (config_.kind == OptimizerKind::Sgd) {
    k.sgd_step(s, w, uses_m() ? m : nullptr, g, n, sgd_hyper(decay, lr));
  } else {
    k.adam_step(s, w, m, v, g, n, adam_hyper(decay, lr));
  }
}

}  // namespace noeira
