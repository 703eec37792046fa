#pragma once
// Checks a module's vjp against central finite differences in fp32.
//
// The scalar is L = Σ u ⊙ forward(x) for a fixed random u, so dL/dy = u. The analytic input and
// parameter gradients from vjp(u) are compared element by element (a sample of elements for big
// tensors) against (L(θ+ε) − L(θ−ε)) / 2ε, with L summed in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/module.hpp"

namespace noeira::testing {

inline std::vector<float> random_values(std::size_t n, std::uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

struct GradCheckOptions {
  float eps = 1e-2f;
  double atol = 5e-3;
  double rtol = 2e-2;
  std::size_t max_checked_per_tensor = 48;  // elements sampled per tensor
  bool check_input = true;
};

// Σ u ⊙ y in double on the host.
inline double weighted_sum(const Tensor& y, const std::vector<float>& u) {
  const std::vector<float> h = y.to_vector();
  double s = 0.0;
  for (std::size_t i = 0; i < h.size(); ++i) s += static_cast<double>(h[i]) * u[i];
  return s;
}

inline std::vector<std::size_t> sample_indices(std::size_t n, std::size_t max_count,
                                               std::uint32_t seed) {
  std::vector<std::size_t> idx(n);
  for (std::size_t i = 0; i < n; ++i) idx[i] = i;
  if (n > max_count) {
    std::mt19937 gen(seed);
    std::shuffle(idx.begin(), idx.end(), gen);
    idx.resize(max_count);
  }
  return idx;
}

inline void expect_close(double analytic, double numeric, const GradCheckOptions& o,
                         const std::string& what) {
  EXPECT_LE(std::abs(analytic - numeric), o.atol + o.rtol * std::abs(numeric))
      << what << ": analytic " << analytic << " vs finite difference " << numeric;
}

// Runs the check for module m on input x (rows × in), in a Train-mode context (dropout leaves
// must be deterministic per step, which they are: the mask depends only on its key).
template <Module M>
void gradcheck(M& m, Tensor x, const GradCheckOptions& o = {}, std::uint32_t seed = 7) {
  Context ctx = Context::for_target(x.target());
  const Tensor& y0 = m.forward(ctx, x);
  const std::vector<float> u = random_values(static_cast<std::size_t>(y0.numel()), seed);
  const Tensor dy = Tensor::from_host(y0.shape(), u, x.target());
  const Tensor& dx_ref = m.vjp(ctx, dy, o.check_input ? InputGrad::Compute : InputGrad::Skip);
  const std::vector<float> dx = o.check_input ? dx_ref.to_vector() : std::vector<float>{};

  // Snapshot parameter gradients before perturbing anything.
  struct Snapshot {
    std::string name;
    Param* p;
    std::vector<float> grad;
  };
  std::vector<Snapshot> params;
  for_each_param(m, [&](const std::string& name, Param& p) {
    params.push_back({name, &p, p.grd.to_vector()});
  });

  auto loss = [&](const Tensor& input) { return weighted_sum(m.forward(ctx, input), u); };

  if (o.check_input && x.dtype() == DType::F32) {
    std::vector<float> xv = x.to_vector();
    for (std::size_t i : sample_indices(xv.size(), o.max_checked_per_tensor, seed + 1)) {
      const float orig = xv[i];
      xv[i] = orig + o.eps;
      x.copy_from(xv);
      const double lp = loss(x);
      xv[i] = orig - o.eps;
      x.copy_from(xv);
      const double lm = loss(x);
      xv[i] = orig;
      x.copy_from(xv);
      expect_close(dx[i], (lp - lm) / (2.0 * o.eps), o, "input[" + std::to_string(i) + "]");
    }
  }
  for (Snapshot& s : params) {
    std::vector<float> pv = s.p->val.to_vector();
    for (std::size_t i : sample_indices(pv.size(), o.max_checked_per_tensor, seed + 2)) {
      const float orig = pv[i];
      pv[i] = orig + o.eps;
      s.p->val.copy_from(pv);
      const double lp = loss(x);
      pv[i] = orig - o.eps;
      s.p->val.copy_from(pv);
      const double lm = loss(x);
      pv[i] = orig;
      s.p->val.copy_from(pv);
      expect_close(s.grad[i], (lp - lm) / (2.0 * o.eps), o,
                   s.name + "[" + std::to_string(i) + "]");
    }
  }
}

}  // namespace noeira::testing
