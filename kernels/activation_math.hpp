#pragma once
// The element-wise math of every activation, written once for the CPU and CUDA kernels.
// derivative() receives both the input x and the output y so each activation uses the cheaper one.
#include <cmath>

#include "kernels/hd.hpp"
#include "kernels/target.hpp"

namespace noeira::act {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

NOEIRA_HD float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

NOEIRA_HD float forward(Activation a, float x) {
  switch (a) {
    case Activation::Identity: return x;
    case Activation::ReLU: return x > 0.0f ? x : 0.0f;
    case Activation::Tanh: return tanhf(x);
    case Activation::Sigmoid: return sigmoid(x);
    case Activation::GeluTanh: {
      const float inner = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
      return 0.5f * x * (1.0f + tanhf(inner));
    }
    case Activation::GeluErf: return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
    case Activation::SiLU: return x * sigmoid(x);
  }
  return x;
}

// d act(x) / dx, from the input x and the already computed output y = act(x).
NOEIRA_HD float derivative(Activation a, float x, float y) {
  switch (a) {
    case Activation::Identity: return 1.0f;
    case Activation::ReLU: return y > 0.0f ? 1.0f : 0.0f;
    case Activation::Tanh: return 1.0f - y * y;
    case Activation::Sigmoid: return y * (1.0f - y);
    case Activation::GeluTanh: {
      const float inner = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
      const float t = tanhf(inner);
      const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner;
    }
    case Activation::GeluErf:
      return 0.5f * (1.0f + erff(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
    case Activation::SiLU: {
      const float s = sigmoid(x);
      return s * (1.0f + x * (1.0f - s));
    }
  }
  return 1.0f;
}

}  // namespace noeira::act
