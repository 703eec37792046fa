#pragma once
// input_grad(i) of a multi-input module (core/module.hpp's convention), shared by the leaves that
// keep one gradient per input (attention, the merge leaves).
#include <initializer_list>
#include <string_view>

#include "core/tensor.hpp"
#include "kernels/error.hpp"

namespace noeira {

// *grads[i] of the last vjp, else an error naming the module: before any vjp, after one with
// InputGrad::Skip, or for an input the module does not have.
inline const Tensor& pick_input_grad(std::string_view module, bool have_grads, int i,
                                     std::initializer_list<const Tensor*> grads) {
  if (!have_grads || i < 0 || i >= static_cast<int>(grads.size())) {
    throw Error(detail::concat(module, ": no gradient of input ", i, " (inputs 0..",
                               grads.size() - 1, ", after a vjp with InputGrad::Compute)"));
  }
  return *grads.begin()[i];
}

}  // namespace noeira
