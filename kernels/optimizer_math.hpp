#pragma once
// Per-element optimizer updates, written once for the CPU and CUDA kernels.
#include <cmath>

#include "kernels/hd.hpp"

namespace noeira {

struct SgdHyper {
  float lr = 0.01f;
  float momentum = 0.0f;      // 0: plain SGD, no buffer
  float weight_decay = 0.0f;  // L2 added to the gradient (already 0 for params without decay)
  bool nesterov = false;
};

struct AdamHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // already 0 for params without decay
  bool decoupled = false;     // AdamW: decay the weight, not the gradient
  float bias_correction1 = 1.0f;  // 1 - beta1^t, from the optimizer's stored step state
  float bias_correction2 = 1.0f;  // 1 - beta2^t
};

NOEIRA_HD void sgd_update(float& w, float* buf, float g, const SgdHyper& h) {
  g += h.weight_decay * w;
  if (buf != nullptr) {
    *buf = h.momentum * *buf + g;
    g = h.nesterov ? g + h.momentum * *buf : *buf;
  }
  w -= h.lr * g;
}

// The per-step constants of an Adam update, derived once per buffer so that the per-element
// update has no divisions by step constants and vectorizes.
struct AdamCoefficients {
  float lr, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay;
  float inv_bias_correction1, inv_bias_correction2;
  bool decoupled;
};

NOEIRA_HD AdamCoefficients adam_coefficients(const AdamHyper& h) {
  return AdamCoefficients{h.lr,
                          h.beta1,
                          1.0f - h.beta1,
                          h.beta2,
                          1.0f - h.beta2,
                          h.eps,
                          h.weight_decay,
                          1.0f / h.bias_correction1,
                          1.0f / h.bias_correction2,
                          h.decoupled};
}

NOEIRA_HD void adam_update(float& w, float& m, float& v, float g, const AdamCoefficients& c) {
  if (c.decoupled) {
    w -= c.lr * c.weight_decay * w;
  } else {
    g += c.weight_decay * w;
  }
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * g * g;
  const float m_hat = m * c.inv_bias_correction1;
  const float v_hat = v * c.inv_bias_correction2;
  w -= c.lr * m_hat / (sqrtf(v_hat) + c.eps);
}

}  // namespace noeira
