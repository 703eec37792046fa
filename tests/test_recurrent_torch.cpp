// Writes two-layer LSTM and GRU stacks' inputs, weights, outputs and every gradient to one file,
// which tests/recurrent_torch_check.py recomputes with torch.nn.LSTM / torch.nn.GRU
// (num_layers=2, batch_first=True) in float64 on the same weights (ctest:
// tests/recurrent_torch.cmake). The file's format: tests/torch_case_file.hpp; its path is
// $NOEIRA_RECURRENT_CASES (without it the test writes a scratch file and removes it).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "leaf_util.hpp"
#include "nn/recurrent.hpp"
#include "nn/sequential.hpp"
#include "torch_case_file.hpp"

namespace noeira {
namespace {

// One stack run forward and back on [batch, steps, In] inputs, recorded under `name`. The
// weights are the layers' own PyTorch-style draws, scaled up so the gates leave their linear
// range and the check exercises the saturating parts of σ and tanh.
template <class Net>
void recurrent_case(testing::CaseFile& file, const std::string& name, const std::string& cell,
                    std::int64_t batch, std::int64_t steps, std::int64_t hidden,
                    std::uint32_t seed) {
  Net m(Init(Target::Cpu, InitSpec{InitKind::KaimingNormal, 0.0f, 0.02f, seed}));
  for_each_param(m, [&](const std::string&, Param& p) {
    std::vector<float> v = p.val.to_vector();
    for (float& e : v) e *= 2.0f;
    p.val.copy_from(v);
  });
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = Tensor::from_host(
      {batch, steps, Net::in_dim},
      testing::random_values(static_cast<std::size_t>(batch * steps * Net::in_dim), seed, -2.0f,
                             2.0f));
  const Tensor& y = m.forward(ctx, x);
  const Tensor dy = Tensor::from_host(
      y.shape(), testing::random_values(static_cast<std::size_t>(y.numel()), seed + 1));
  file.add(name + "/x", x);
  file.add(name + "/dy", dy);
  file.add(name + "/y", y);
  file.add(name + "/dx", m.vjp(ctx, dy, InputGrad::Compute));
  file.add_params(name, m);
  file.add_case({{"name", name}, {"cell", cell}, {"input", Net::in_dim}, {"hidden", hidden}});
}

TEST(RecurrentTorch, WritesTheCases) {
  testing::CaseFile file;
  recurrent_case<Sequential<LSTM<5, 7>, LSTM<7, 7>>>(file, "lstm", "LSTM", 3, 6, 7, 1);
  recurrent_case<Sequential<GRU<5, 4>, GRU<4, 4>>>(file, "gru", "GRU", 3, 6, 4, 2);
  recurrent_case<Sequential<LSTM<3, 2>, LSTM<2, 2>>>(file, "lstm_one_step", "LSTM", 2, 1, 2, 3);
  recurrent_case<Sequential<GRU<2, 3>, GRU<3, 3>>>(file, "gru_long", "GRU", 1, 17, 3, 4);
  file.write_where_asked("NOEIRA_RECURRENT_CASES", "noeira_recurrent_cases");
}

}  // namespace
}  // namespace noeira
