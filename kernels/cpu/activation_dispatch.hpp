#pragma once
// Turns a run-time Activation into a compile-time one, once per kernel call, so the inner loops
// are specialized (and vectorize) instead of switching on the activation for every element.
#include <type_traits>

#include "kernels/target.hpp"

namespace noeira::cpu {

template <Activation A>
using ActivationTag = std::integral_constant<Activation, A>;

template <class Body>
void with_activation(Activation a, Body&& body) {
  switch (a) {
    case Activation::Identity: return body(ActivationTag<Activation::Identity>{});
    case Activation::ReLU: return body(ActivationTag<Activation::ReLU>{});
    case Activation::Tanh: return body(ActivationTag<Activation::Tanh>{});
    case Activation::Sigmoid: return body(ActivationTag<Activation::Sigmoid>{});
    case Activation::GeluTanh: return body(ActivationTag<Activation::GeluTanh>{});
    case Activation::GeluErf: return body(ActivationTag<Activation::GeluErf>{});
    case Activation::SiLU: return body(ActivationTag<Activation::SiLU>{});
    case Activation::Elu: return body(ActivationTag<Activation::Elu>{});
    case Activation::HardSwish: return body(ActivationTag<Activation::HardSwish>{});
    case Activation::Mish: return body(ActivationTag<Activation::Mish>{});
    case Activation::Softplus: return body(ActivationTag<Activation::Softplus>{});
  }
}

}  // namespace noeira::cpu
