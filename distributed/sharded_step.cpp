#include "distributed/sharded_step.hpp"

#include "optim/optimizer.hpp"

namespace noeira::dist {

void optimizer_step(ParamStore& store, Optimizer& optimizer, float lr) {
  store.ensure_state(optimizer.uses_m(), optimizer.uses_v());
  store.drop_initial();  // ZeRO-3: the initial copy is not needed once training runs
  optimizer.begin_step();
  // One fused update per run of pieces that share their decay (all of a unit's pieces when there
  // is no weight decay), across the alignment padding between them: padding holds zeros in
  // values, gradients and moments alike, and every optimizer maps (w, g, m, v) = 0 to 0. On a
  // GPU this is one launch per unit instead of one per parameter.
  const bool decay_matters = optimizer.config().weight_decay != 0.0f;
  for (std::size_t u = 0; u < store.unit_count(); ++u) {
    float* w = store.owned_values(u);
    const float* g = store.widened_owned_grads(u);
    float* m = store.owned_state(State::M, u);
    float* v = store.owned_state(State::V, u);
    const std::int64_t base = store.owned(u).begin;
    const std::size_t first_param = store.layout().first_param[u];
    auto decay_of = [&](const Piece& p) { return store.decay(first_param + p.param); };
    const std::vector<Piece>& pieces = store.owned_pieces(u);
    std::size_t first = 0;
    for (std::size_t i = 1; i <= pieces.size(); ++i) {
      if (i < pieces.size() && (!decay_matters || decay_of(pieces[i]) == decay_of(pieces[first]))) {
        continue;
      }
      const Piece& last = pieces[i - 1];
      const std::int64_t at = pieces[first].flat_begin - base;
      const std::int64_t n = last.flat_begin + last.count - pieces[first].flat_begin;
      optimizer.update(store.kernels(), store.stream(), w + at, m != nullptr ? m + at : nullptr,
                       v != nullptr ? v + at : nullptr, g + at, n, decay_of(pieces[first]), lr);
      first = i;
    }
  }
}

double owned_grad_sum_squares(ParamStore& store) {
  double sum = 0.0;
  for (std::size_t u = 0; u < store.unit_count(); ++u) {
    const float* g = store.widened_owned_grads(u);
    for (const Piece& p : store.owned_pieces(u)) {
      sum += store.kernels().sum_squares(store.stream(), g + (p.flat_begin - store.owned(u).begin),
                                         p.count);
    }
  }
  return sum;
}

void scale_owned_grads(ParamStore& store, float factor) {
  if (store.bf16_grads()) {
    store.scale_bf16_grads(factor);  // applied as they are widened: rounded once, not twice
    return;
  }
  for (std::size_t u = 0; u < store.unit_count(); ++u) {
    store.kernels().scale(store.stream(), store.owned_grads(u), factor, store.owned(u).size());
  }
}

}  // namespace noeira::dist
