#pragma once
// Memory accounting: the bytes a rank's parameter store holds, next to the formula of docs/design.md for
// its policy (fp32; k = the optimizer-state buffers allocated: 2 for Adam, 1 for SGD with
// momentum, 0 for plain SGD). Ψ = parameter count, N = ranks:
//
//   params   Ψ (ZeRO-3: Ψ/N plus a gather buffer of the largest unit, two with prefetch, plus
//            the pinned units)
//   grads    Ψ, or Ψ/N where gradients are sliced (ZeRO-2/3) plus the pinned units
// A pinned unit (one an earlier unit borrows from: a tied weight, param_store.hpp) is held whole
// under every policy; with no tied weights the formulas are docs/design.md's.
//   state    k·Ψ, or k·Ψ/N where the state is sliced (ZeRO-1/2/3)
// Under bf16 mixed precision (param_store.hpp) the parameters count 2 bytes each and take a
// gather buffer under every policy (its fp32 words for the running unit; ZeRO-3 a bf16 staging
// buffer beside each), and the fp32 masters count with the state: (k + 1)·Ψ, sliced as it is.
// Under bf16 gradients the gradients count 2 bytes each (Ψ/2, or Ψ/2N sliced), and the pinned
// units' whole fp32 gradients join them under every policy; the fp32 unit buffer the leaves
// write is transient.
#include <cstdint>
#include <string>

#include "distributed/param_store.hpp"
#include "distributed/residency.hpp"

namespace noeira::dist {

struct MemoryReport {
  Policy policy = Policy::Ddp;
  int rank = 0;
  int ranks = 1;
  std::int64_t numel = 0;        // Ψ
  bool mixed = false;            // bf16 compute parameters, fp32 masters (--precision bf16)
  bool bf16_grads = false;       // gradients held in bf16 (--grad-dtype bf16)
  std::int64_t param_bytes = 0;  // held between steps
  std::int64_t grad_bytes = 0;
  std::int64_t optimizer_bytes = 0;
  std::int64_t transient_bytes = 0;  // the per-unit gradient buffer (ZeRO-2/3), the initial copy
                                     // (ZeRO-3 before broadcast_initial_parameters)
  // The step's tensor memory beyond the store: the most this rank's tensors held during a step
  // above what they held at its start, less what the store added (the optimizer state of a first
  // step): the batch, the activations the modules keep for their vjps, gradients of activations
  // and scratch. Measured by the trainer for the first step (core/tensor.hpp's tensor_bytes);
  // -1: not measured.
  std::int64_t activation_bytes = -1;
  double formula_param_bytes = 0;
  double formula_grad_bytes = 0;
  double formula_optimizer_bytes = 0;

  std::int64_t total_bytes() const { return param_bytes + grad_bytes + optimizer_bytes; }
  double formula_total_bytes() const {
    return formula_param_bytes + formula_grad_bytes + formula_optimizer_bytes;
  }
  // "rank 0/2 zero2: params 1.2 MiB (formula 1.2 MiB), grads ..., optimizer ..., total ...".
  std::string to_string() const;
};

MemoryReport memory_report(const ParamStore& store, Policy policy, int ranks);

}  // namespace noeira::dist
