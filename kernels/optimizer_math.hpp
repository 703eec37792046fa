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

NOEIRA_HD void adam_update(float& w, float& m, float& v, float g, const AdamHyper& h) {
  if (h.decoupled) {
    w -= h.lr * h.weight_decay * w;
  } else {
    g += h.weight_decay * w;
  }
  m = h.beta1 * m + (1.0f - h.beta1) * g;
  v = h.beta2 * v + (1.0f - h.beta2) * g * g;
  const float m_hat = m / h.bias_correction1;
  const float v_hat = v / h.bias_correction2;
  w -= h.lr * m_hat / (sqrtf(v_hat) + h.eps);
}

}  // namespace noeira
