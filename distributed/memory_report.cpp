#include "distributed/memory_report.hpp"

#include <iomanip>
#include <sstream>

namespace noeira::dist {

namespace {
std::string mib(double bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(3) << bytes / (1024.0 * 1024.0) << " MiB";
  return os.str();
}
}  // namespace

std::string MemoryReport::to_string() const {
  std::ostringstream os;
  const char* precision = mixed && bf16_grads ? " (bf16 params and grads, fp32 masters with the "
                                                "optimizer)"
                          : mixed      ? " (bf16 params, fp32 masters with the optimizer)"
                          : bf16_grads ? " (bf16 grads)"
                                       : "";
  os << "rank " << rank << "/" << ranks << " " << dist::to_string(policy) << precision
     << ": params "
     << mib(static_cast<double>(param_bytes)) << " (formula " << mib(formula_param_bytes)
     << "), grads " << mib(static_cast<double>(grad_bytes)) << " (formula "
     << mib(formula_grad_bytes) << "), optimizer " << mib(static_cast<double>(optimizer_bytes))
     << " (formula " << mib(formula_optimizer_bytes) << "), total "
     << mib(static_cast<double>(total_bytes())) << " (formula " << mib(formula_total_bytes())
     << "), transient " << mib(static_cast<double>(transient_bytes));
  if (activation_bytes >= 0) {
    os << ", activations " << mib(static_cast<double>(activation_bytes)) << " (step peak)";
  }
  return os.str();
}

MemoryReport memory_report(const ParamStore& store, Policy policy, int ranks) {
  MemoryReport r;
  r.policy = policy;
  r.rank = store.rank();
  r.ranks = ranks;
  r.numel = store.layout().numel();
  r.param_bytes = store.value_bytes();
  r.grad_bytes = store.grad_bytes();
  r.optimizer_bytes = store.state_bytes();
  r.transient_bytes = store.transient_bytes();
  const double psi = static_cast<double>(r.numel) * sizeof(float);
  const double n = static_cast<double>(ranks);
  const double state_buffers =
      (store.has_state(State::M) ? 1.0 : 0.0) + (store.has_state(State::V) ? 1.0 : 0.0);
  const Residency res = store.residency();
  auto share = [&](Extent e) { return e == Extent::Slice ? psi / n : psi; };
  // Sliced values add the gather buffers (one unit each: the largest) and the pinned (tied) units,
  // held whole; sliced gradients the pinned units' whole gradients.
  const double pinned = static_cast<double>(store.pinned_elements()) * sizeof(float);
  // Mixed precision: 2 bytes per compute value, and the masters count as a third state buffer
  // (the ZeRO paper's 2Ψ + 12Ψ for the parameters and Adam, beside fp32 gradients' 4Ψ).
  r.mixed = store.mixed();
  const double value_width = r.mixed ? 0.5 : 1.0;
  r.formula_param_bytes = value_width * share(res.params);
  if (store.gathers_values()) {
    const double buffer = static_cast<double>(store.largest_unpinned_unit()) * sizeof(float);
    const double staging = r.mixed && res.params == Extent::Slice ? 0.5 : 0.0;
    r.formula_param_bytes +=
        static_cast<double>(store.gather_buffers()) * buffer * (1.0 + staging) + pinned;
  }
  r.bf16_grads = store.bf16_grads();
  r.formula_grad_bytes =
      (r.bf16_grads ? 0.5 : 1.0) * share(res.grads) + (store.transient_grads() ? pinned : 0.0);
  r.formula_optimizer_bytes = (state_buffers + (r.mixed ? 1.0 : 0.0)) * share(res.state);
  return r;
}

}  // namespace noeira::dist
