#pragma once
// Optimizers: SGD (optionally with momentum, Nesterov), Adam and AdamW. The per-element math lives
// in kernels/optimizer_math.hpp; this class turns the configuration and the step state into the
// kernels' hyper-parameters.
//
// The update works on flat buffers: the parameter store (distributed/param_store.hpp), which owns
// the values, gradients and the optimizer state m / v, hands it the runs of what a rank owns
// (distributed/sharded_step.hpp). The optimizer itself holds no per-element state.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/module.hpp"
#include "core/names.hpp"

namespace noeira {

enum class OptimizerKind : std::uint8_t { Sgd, Adam, AdamW };

inline constexpr NameTable<OptimizerKind, 3> kOptimizerNames{
    {{{OptimizerKind::Sgd, "sgd"}, {OptimizerKind::Adam, "adam"}, {OptimizerKind::AdamW, "adamw"}}},
    "optimizer"};

// "sgd", "adam", "adamw"; anything else is an InputError listing the accepted names.
OptimizerKind parse_optimizer_kind(std::string_view name);
std::string_view to_string(OptimizerKind kind);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::Adam;
  float lr = 1e-3f;          // base learning rate (a schedule may pass another per step)
  float momentum = 0.0f;     // SGD only; 0 means no momentum buffer
  bool nesterov = false;     // SGD only; needs momentum > 0
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // Adam, AdamW
  // SGD and Adam: L2 added to the gradient; AdamW: decoupled decay of the weight. Either way only
  // for parameters whose Decay is Apply.
  float weight_decay = 0.0f;
};

// Adam's step state as stored values (not recomputed from t) so a resumed run matches bit for bit.
struct OptimizerState {
  std::int64_t t = 0;       // completed begin_step() calls
  double beta1_pow = 1.0;   // beta1^t
  double beta2_pow = 1.0;   // beta2^t
};

class Optimizer {
 public:
  // Checks the configuration: a value out of range is an InputError naming the field.
  explicit Optimizer(OptimizerConfig config);

  // Advances the step state (t, beta1^t, beta2^t). Call once per step before the update() calls.
  void begin_step();

  // Updates one flat buffer of n elements (a whole Param or a shard of one): weights w, gradient
  // g, and m/v: Adam's moments, or m as SGD's momentum buffer; null where uses_m()/uses_v() say
  // they are not needed. decay says whether weight decay applies to this buffer.
  void update(const KernelTable& k, Stream s, float* w, float* m, float* v, const float* g,
              std::int64_t n, Decay decay, float lr) const;


  const OptimizerConfig& config() const { return config_; }
  const OptimizerState& state() const { return state_; }
  // Restores a saved step state (resume); checks that it is one a run could have produced.
  void set_state(const OptimizerState& state);

  // Whether update() reads and writes m (Adam, AdamW, SGD with momentum) and v (Adam, AdamW).
  bool uses_m() const;
  bool uses_v() const;
  // Whether the optimizer keeps any per-element state at all.
  bool needs_moments() const { return uses_m() || uses_v(); }

  // The kernels' hyper-parameters for this step (exposed for fused or sharded callers).
  SgdHyper sgd_hyper(Decay decay, float lr) const;
  AdamHyper adam_hyper(Decay decay, float lr) const;

 private:
  OptimizerConfig config_;
  OptimizerState state_;
};

}  // namespace noeira
