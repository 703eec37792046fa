#pragma once
// The element-wise math of every activation, written once for the CPU and CUDA kernels.
// derivative() receives both the input x and the output y so each activation uses the cheaper one.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/hd.hpp"
#include "kernels/target.hpp"

namespace noeira::act {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

NOEIRA_HD float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// e^x to about 1 ulp in plain arithmetic, for loops that must vectorize: glibc's expf and tanhf
// are calls the compiler cannot vectorize without -ffast-math (which would also reorder our
// fixed-order sums), and tanhf made GELU 40% of a gpt-char step. Cephes' expf: x = n·ln2 + r
// (n rounded by the 1.5·2^23 trick, ln2 in two parts), e^r by a degree-7 polynomial, 2^n from the
// exponent bits. Every operation is one IEEE float operation, so vector lanes and a scalar tail
// give the same bits. CUDA devices keep their expf.
// exp_in_range needs x in [-87.3, 88.3] (n within the normal exponents); NaN stays NaN.
NOEIRA_HD float exp_in_range(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  const float t = x * kLog2e + kRound;
  const float n = t - kRound;
  std::int32_t ti, ri;
  std::memcpy(&ti, &t, sizeof t);
  std::memcpy(&ri, &kRound, sizeof kRound);
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const std::int32_t bits = (ti - ri + 127) << 23;  // 2^n
  float scale;
  std::memcpy(&scale, &bits, sizeof bits);
  return p * scale;
#endif
}

// e^x for any x: clamped to [-87.3, 88.3] first (e^x tends to 1.2e-38 below, 2.2e38 above).
NOEIRA_HD float exp_vectorizable(float x) {
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  return exp_in_range(x);
}

// e^d for d <= 0 (a value minus its row's max; or NaN) in plain arithmetic, exactly 0 where e^d is
// below the smallest normal float (e^-87.3), as for d = -inf.
NOEIRA_HD float exp_nonpositive(float d) {
  const float e = exp_vectorizable(d);
  return d < -87.3f ? 0.0f : e;
}

// GELU's tanh form: 0.5·x·(1 + tanh(u)) = x·s with s = 1 / (1 + e^(-2u)), u the inner term;
// no cancellation for large negative x (1 + tanh(u) computed as 2s), one exponential.
// Where e^(-2u) passes e^80 (u < -40) s is taken as 0 (it is below 1.8e-35), as tanhf's
// 1 + tanh(u) was. The bound keeps every constant the vectorizer folds for the clamped lanes a
// normal float: it computes them in every lane before it selects, and a subnormal operand costs
// ~100 cycles (a bound at 88.3 made GELU 6x slower than its scalar loop).
NOEIRA_HD float gelu_tanh_inner(float x) { return kSqrt2OverPi * (x + kGeluCubic * x * x * x); }
NOEIRA_HD float gelu_tanh_gate(float x) {
  const float w = -2.0f * gelu_tanh_inner(x);
  const float e = exp_in_range(w < -87.3f ? -87.3f : (w > 80.0f ? 80.0f : w));
  return w > 80.0f ? 0.0f : 1.0f / (1.0f + e);
}

// Mish's gate tanh(softplus(x)) = ((1 + e^x)² − 1) / ((1 + e^x)² + 1) = n / (n + 2) with
// n = e^x (e^x + 2): one exponential, and no cancellation for negative x (n is small, not a
// difference of near-equal terms). Above 20 the gate is 1 in float (1 − 2/n < 2^-24 · 2^-4).
NOEIRA_HD float mish_gate(float x) {
  if (x > 20.0f) return 1.0f;
  const float e = exp_vectorizable(x);
  const float n = e * (e + 2.0f);
  return n / (n + 2.0f);
}

NOEIRA_HD float forward(Activation a, float x) {
  switch (a) {
    case Activation::Identity: return x;
    case Activation::ReLU: return x > 0.0f ? x : 0.0f;
    case Activation::Tanh: return tanhf(x);
    case Activation::Sigmoid: return sigmoid(x);
    case Activation::GeluTanh: return x * gelu_tanh_gate(x);
    case Activation::GeluErf: return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
    case Activation::SiLU: return x * sigmoid(x);
    case Activation::Elu: return x > 0.0f ? x : expm1f(x);
    case Activation::HardSwish: {
      const float r = x + 3.0f;
      return x * (r < 0.0f ? 0.0f : (r > 6.0f ? 6.0f : r)) / 6.0f;
    }
    case Activation::Mish: return x * mish_gate(x);
    // PyTorch's Softplus: x itself above the threshold 20, where log1p(e^x) is x in float.
    case Activation::Softplus: return x > 20.0f ? x : log1pf(expf(x));
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
      // d/dx x·s(2u) = s + x · 2s(1 - s) · du/dx  (with t = tanh u: s = (1 + t)/2,
      // 1 - t² = 4s(1 - s)).
      const float s = gelu_tanh_gate(x);
      const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
      return s + 2.0f * x * s * (1.0f - s) * dinner;
    }
    case Activation::GeluErf:
      return 0.5f * (1.0f + erff(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
    case Activation::SiLU: {
      const float s = sigmoid(x);
      return s * (1.0f + x * (1.0f - s));
    }
    // y = e^x − 1 below 0, so its slope e^x is y + 1.
    case Activation::Elu: return y > 0.0f ? 1.0f : y + 1.0f;
    // PyTorch's choice at the kinks: 0 at −3, x/3 + 1/2 up to and with 3.
    case Activation::HardSwish:
      return x < -3.0f ? 0.0f : (x <= 3.0f ? x / 3.0f + 0.5f : 1.0f);
    case Activation::Mish: {
      // d/dx x·t(x) with t = tanh(softplus(x)): t + x·(1 − t²)·sigmoid(x).
      const float t = mish_gate(x);
      return t + x * (1.0f - t * t) * sigmoid(x);
    }
    // PyTorch's: z / (z + 1) with z = e^x (the sigmoid), 1 above the threshold.
    case Activation::Softplus: {
      if (x > 20.0f) return 1.0f;
      const float z = expf(x);
      return z / (z + 1.0f);
    }
  }
  return 1.0f;
}

}  // namespace noeira::act
