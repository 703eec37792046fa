#pragma once
// The optimizer step and the gradient-norm pieces over what a rank owns in a parameter store:
// the whole of every unit (state Full, DDP) or its slice (ZeRO). Local work only: the policy does
// the communication around it (the scalar allreduce of the norm, ZeRO-1/2's all-gather after the
// step). A store of one rank is a plain single-process optimizer over a model.
#include "distributed/param_store.hpp"

namespace noeira {
class Optimizer;
}

namespace noeira::dist {

// One step of `optimizer` (begin_step, then the updates) over every owned piece, allocating the
// store's optimizer state on first use.
void optimizer_step(ParamStore& store, Optimizer& optimizer, float lr);

// Σ g² over the owned gradient pieces (padding excluded).
double owned_grad_sum_squares(ParamStore& store);

// g *= factor over the owned gradients (bf16 gradients: over their widened values).
void scale_owned_grads(ParamStore& store, float factor);

}  // namespace noeira::dist
