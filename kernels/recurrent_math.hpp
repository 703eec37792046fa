#pragma once
// The pointwise math of one recurrent time step (RecurrentStep, kernel_table.hpp), written once
// for every backend: the CPU loops over (sequence, unit), CUDA gives each pair a thread. A unit's
// gates are `hidden` apart in its sequence's gate row, so one call reads and writes only its own
// elements and the calls are independent.
//
// LSTM (torch.nn.LSTM): i, f, o = σ(·), g = tanh(·); c = f·c_prev + i·g; h = o·tanh(c).
// GRU (torch.nn.GRU): r, z = σ(x_r + h_r + b_hr, x_z + h_z + b_hz), hn = W_hn·h_prev + b_hn,
// n = tanh(x_n + r·hn), h = (1 - z)·n + z·h_prev.
#include <cmath>
#include <cstdint>

#include "kernels/hd.hpp"
#include "kernels/kernel_table.hpp"

namespace noeira::recurrent_math {

NOEIRA_HD float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// Element offsets of unit j of sequence b in a [batch, steps, width] slice and in a carry.
struct UnitIndex {
  std::int64_t gates;  // first gate (add k·hidden for gate k)
  std::int64_t state;  // h, c, dy
  std::int64_t carry;  // dh, dc
};

NOEIRA_HD UnitIndex unit_index(const RecurrentStep& s, int gate_count, std::int64_t b,
                                      std::int64_t j) {
  return {b * s.steps * gate_count * s.hidden + j, b * s.steps * s.hidden + j, b * s.hidden + j};
}

NOEIRA_HD void lstm_forward(const RecurrentStep& s, std::int64_t b, std::int64_t j) {
  const std::int64_t n = s.hidden;
  const UnitIndex u = unit_index(s, 4, b, j);
  float* g = s.gates + u.gates;
  const float i = sigmoid(g[0] + s.bias_hh[j]);
  const float f = sigmoid(g[n] + s.bias_hh[n + j]);
  const float cand = tanhf(g[2 * n] + s.bias_hh[2 * n + j]);
  const float o = sigmoid(g[3 * n] + s.bias_hh[3 * n + j]);
  const float c_prev = s.c_prev != nullptr ? s.c_prev[u.state] : 0.0f;
  const float c = f * c_prev + i * cand;
  const float h = o * tanhf(c);
  g[0] = i;
  g[n] = f;
  g[2 * n] = cand;
  g[3 * n] = o;
  s.c[u.state] = c;
  s.h[u.state] = h;
  if (s.h_next_prev != nullptr) s.h_next_prev[u.state] = h;
}

NOEIRA_HD void lstm_backward(const RecurrentStep& s, std::int64_t b, std::int64_t j) {
  const std::int64_t n = s.hidden;
  const UnitIndex u = unit_index(s, 4, b, j);
  const float* g = s.gates + u.gates;
  const float i = g[0], f = g[n], cand = g[2 * n], o = g[3 * n];
  const float tc = tanhf(s.c[u.state]);
  const float c_prev = s.c_prev != nullptr ? s.c_prev[u.state] : 0.0f;
  const float dh = s.dy[u.state] + s.dh[u.carry];
  const float dc = s.dc[u.carry] + dh * o * (1.0f - tc * tc);
  float* d = s.dgates + u.gates;
  d[0] = dc * cand * i * (1.0f - i);
  d[n] = dc * c_prev * f * (1.0f - f);
  d[2 * n] = dc * i * (1.0f - cand * cand);
  d[3 * n] = dh * tc * o * (1.0f - o);
  s.dc[u.carry] = dc * f;
  s.dh[u.carry] = 0.0f;  // all of dh_prev comes through W_hh
}

NOEIRA_HD void gru_forward(const RecurrentStep& s, std::int64_t b, std::int64_t j) {
  const std::int64_t n = s.hidden;
  const UnitIndex u = unit_index(s, 3, b, j);
  float* g = s.gates + u.gates;
  float* hg = s.hidden_gates != nullptr ? s.hidden_gates + u.gates : nullptr;
  const float h_r = hg != nullptr ? hg[0] : 0.0f;
  const float h_z = hg != nullptr ? hg[n] : 0.0f;
  const float h_n = (hg != nullptr ? hg[2 * n] : 0.0f) + s.bias_hh[2 * n + j];
  const float r = sigmoid(g[0] + h_r + s.bias_hh[j]);
  const float z = sigmoid(g[n] + h_z + s.bias_hh[n + j]);
  const float cand = tanhf(g[2 * n] + r * h_n);
  const float h_prev = s.h_prev != nullptr ? s.h_prev[u.state] : 0.0f;
  const float h = (1.0f - z) * cand + z * h_prev;
  g[0] = r;
  g[n] = z;
  g[2 * n] = cand;
  if (hg != nullptr) hg[2 * n] = h_n;
  s.h[u.state] = h;
  if (s.h_next_prev != nullptr) s.h_next_prev[u.state] = h;
}

// At t = 0 (null h_prev and hidden_gates) hn is b_hn alone, recomputed here.
NOEIRA_HD void gru_backward(const RecurrentStep& s, std::int64_t b, std::int64_t j) {
  const std::int64_t n = s.hidden;
  const UnitIndex u = unit_index(s, 3, b, j);
  const float* g = s.gates + u.gates;
  const float r = g[0], z = g[n], cand = g[2 * n];
  const float h_n = s.hidden_gates != nullptr ? s.hidden_gates[u.gates + 2 * n]
                                              : s.bias_hh[2 * n + j];
  const float h_prev = s.h_prev != nullptr ? s.h_prev[u.state] : 0.0f;
  const float dh = s.dy[u.state] + s.dh[u.carry];
  const float dn = dh * (1.0f - z) * (1.0f - cand * cand);
  const float dr = dn * h_n * r * (1.0f - r);
  const float dz = dh * (h_prev - cand) * z * (1.0f - z);
  float* dx = s.dgates + u.gates;
  dx[0] = dr;
  dx[n] = dz;
  dx[2 * n] = dn;
  float* dhg = s.dhidden_gates + u.gates;
  dhg[0] = dr;
  dhg[n] = dz;
  dhg[2 * n] = dn * r;
  s.dh[u.carry] = dh * z;
}

NOEIRA_HD void step_forward(const RecurrentStep& s, std::int64_t b, std::int64_t j) {
  if (s.cell == RecurrentCell::Lstm) {
    lstm_forward(s, b, j);
  } else {
    gru_forward(s, b, j);
  }
}

NOEIRA_HD void step_backward(const RecurrentStep& s, std::int64_t b, std::int64_t j) {
  if (s.cell == RecurrentCell::Lstm) {
    lstm_backward(s, b, j);
  } else {
    gru_backward(s, b, j);
  }
}

}  // namespace noeira::recurrent_math
