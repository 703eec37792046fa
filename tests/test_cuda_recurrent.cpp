// The recurrent layers on CUDA against the CPU reference (tests/cuda_compare.hpp): the same
// weights and sequences through an LSTM and a GRU stack on both targets; outputs, input
// gradients and every parameter gradient must agree to GEMM tolerance (the cell math is shared,
// kernels/recurrent_math.hpp; the products sum in another order). Without a device: skipped.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda_compare.hpp"
#include "gpu_skip.hpp"
#include "leaf_util.hpp"
#include "nn/recurrent.hpp"
#include "nn/sequential.hpp"

namespace noeira {
namespace {

using testing::Outputs;

template <class Net>
Outputs run_stack(Target t, std::int64_t batch, std::int64_t steps, std::uint32_t seed) {
  Net m(Init(t, InitSpec{InitKind::KaimingNormal, 0.0f, 0.02f, seed}));
  Context ctx = Context::for_target(t);
  const Tensor x = testing::random_on(t, {batch, steps, Net::in_dim}, seed + 1, -2.0f, 2.0f);
  Outputs out;
  const Tensor& y = m.forward(ctx, x);
  out.push_back({"y", y.to_vector()});
  const Tensor dy = testing::random_on(t, y.shape(), seed + 2);
  out.push_back({"dx", m.vjp(ctx, dy, InputGrad::Compute).to_vector()});
  for_each_param(m, [&](const std::string& name, Param& p) {
    out.push_back({"grad " + name, p.grd.to_vector()});
  });
  return out;
}

TEST(CudaRecurrent, LstmStackMatchesTheCpu) {
  NOEIRA_REQUIRE_GPU();
  testing::expect_same_on_both(
      [](Target t) { return run_stack<Sequential<LSTM<6, 32>, LSTM<32, 32>>>(t, 5, 9, 1); },
      testing::kGemm);
}

TEST(CudaRecurrent, GruStackMatchesTheCpu) {
  NOEIRA_REQUIRE_GPU();
  testing::expect_same_on_both(
      [](Target t) { return run_stack<Sequential<GRU<6, 32>, GRU<32, 32>>>(t, 5, 9, 2); },
      testing::kGemm);
}

}  // namespace
}  // namespace noeira
