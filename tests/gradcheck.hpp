#pragma once
// Checks a module's vjp against central finite differences in fp32.
//
// The scalar is L = Σ u ⊙ forward(x) for a fixed random u, so dL/dy = u. The analytic input and
// parameter gradients from vjp(u) are compared element by element (a sample of elements for big
// tensors) against (L(θ+ε) − L(θ−ε)) / 2ε, with L summed in double. gradcheck_inputs does the
// same for modules of several inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
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

// One tensor whose analytic gradient is checked against finite differences: its values are
// perturbed in place (an input, or a parameter's val), elements sampled with `seed`.
struct FdTarget {
  std::string name;
  Tensor* value;
  std::vector<float> grad;
  std::uint32_t seed;
};

// Compares every target's analytic gradient with (L(θ+ε) − L(θ−ε)) / 2ε of loss().
inline void expect_finite_differences(const std::vector<FdTarget>& targets,
                                      const std::function<double()>& loss,
                                      const GradCheckOptions& o) {
  for (const FdTarget& t : targets) {
    std::vector<float> v = t.value->to_vector();
    for (std::size_t i : sample_indices(v.size(), o.max_checked_per_tensor, t.seed)) {
      const float orig = v[i];
      v[i] = orig + o.eps;
      t.value->copy_from(v);
      const double lp = loss();
      v[i] = orig - o.eps;
      t.value->copy_from(v);
      const double lm = loss();
      v[i] = orig;
      t.value->copy_from(v);
      expect_close(t.grad[i], (lp - lm) / (2.0 * o.eps), o, t.name + "[" + std::to_string(i) + "]");
    }
  }
}

// The parameters of m as targets, their gradients snapshotted now.
template <class M>
void add_param_targets(M& m, std::vector<FdTarget>& targets, std::uint32_t seed) {
  for_each_param(m, [&](const std::string& name, Param& p) {
    targets.push_back({name, &p.val, p.grd.to_vector(), seed});
  });
}

// Runs the check for module m on input x (rows × in), in a Train-mode context (dropout leaves
// must be deterministic per step, which they are: the mask depends only on its key).
template <Module M>
void gradcheck(M& m, Tensor x, const GradCheckOptions& o = {}, std::uint32_t seed = 7) {
  Context ctx = Context::for_target(x.target());
  const Tensor& y0 = m.forward(ctx, x);
  const std::vector<float> u = random_values(static_cast<std::size_t>(y0.numel()), seed);
  const Tensor dy = Tensor::from_host(y0.shape(), u, x.target());
  const Tensor& dx = m.vjp(ctx, dy, o.check_input ? InputGrad::Compute : InputGrad::Skip);
  std::vector<FdTarget> targets;
  if (o.check_input && x.dtype() == DType::F32) {
    targets.push_back({"input", &x, dx.to_vector(), seed + 1});
  }
  add_param_targets(m, targets, seed + 2);
  expect_finite_differences(targets, [&] { return weighted_sum(m.forward(ctx, x), u); }, o);
}

// The same for a module of several inputs (core/module.hpp's convention): forward(ctx, inputs)
// runs it, and input i's analytic gradient is m.input_grad(i) after the vjp.
template <MultiInputModule M, class Forward>
void gradcheck_inputs(M& m, std::vector<Tensor> inputs, Forward&& forward,
                      const GradCheckOptions& o = {}, std::uint32_t seed = 7) {
  Context ctx = Context::for_target(inputs.at(0).target());
  const Tensor& y0 = forward(ctx, inputs);
  const std::vector<float> u = random_values(static_cast<std::size_t>(y0.numel()), seed);
  const Tensor dy = Tensor::from_host(y0.shape(), u, inputs[0].target());
  m.vjp(ctx, dy, InputGrad::Compute);
  std::vector<FdTarget> targets;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    targets.push_back({"input " + std::to_string(i), &inputs[i],
                       m.input_grad(static_cast<int>(i)).to_vector(),
                       seed + 1 + static_cast<std::uint32_t>(i)});
  }
  add_param_targets(m, targets, seed + 1 + static_cast<std::uint32_t>(inputs.size()));
  expect_finite_differences(targets, [&] { return weighted_sum(forward(ctx, inputs), u); }, o);
}

}  // namespace noeira::testing
