// The module contract with sequence dimensions: a module that acts on the last dimension sees
// [B, T, C] as B·T rows of C, gives the same numbers as on the flattened [B·T, C] rows, keeps the
// leading dimensions in its output and its input gradient, and names itself on a bad width; a
// dropout mask over [B, T, C] is the same whether the batch is whole or split by samples.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "leaf_util.hpp"
#include "nn/activation.hpp"
#include "nn/dropout.hpp"
#include "nn/layernorm.hpp"
#include "nn/linear.hpp"
#include "nn/parallel.hpp"
#include "nn/residual.hpp"
#include "nn/sequential.hpp"

namespace noeira {
namespace {

using testing::kLeafInit;
using testing::random_values;

constexpr std::int64_t kB = 3, kT = 5, kC = 8;

using Block = Sequential<LayerNorm<kC>, Residual<Sequential<LinearGELU<kC, 12>, Linear<12, kC>>>,
                         Parallel<Linear<kC, 3>, GELU<kC>>>;

template <Module M>
void expect_sequence_equals_rows(M& m) {
  Context ctx = Context::for_target(Target::Cpu);
  const std::vector<float> x = random_values(kB * kT * kC, 5);
  const Tensor seq = Tensor::from_host({kB, kT, kC}, x);
  const Tensor rows = Tensor::from_host({kB * kT, kC}, x);
  const std::vector<float> dy = random_values(kB * kT * M::out_dim, 6);

  const Tensor& y_seq = m.forward(ctx, seq);
  EXPECT_EQ(y_seq.shape(), (Shape{kB, kT, M::out_dim}));
  const std::vector<float> out_seq = y_seq.to_vector();
  const Tensor& dx_seq = m.vjp(ctx, Tensor::from_host({kB, kT, M::out_dim}, dy), InputGrad::Compute);
  EXPECT_EQ(dx_seq.shape(), (Shape{kB, kT, kC}));
  const std::vector<float> grad_seq = dx_seq.to_vector();
  std::vector<std::vector<float>> param_grads_seq;
  for_each_param(m, [&](const std::string&, Param& p) { param_grads_seq.push_back(p.grd.to_vector()); });

  const Tensor& y_rows = m.forward(ctx, rows);
  EXPECT_EQ(y_rows.shape(), (Shape{kB * kT, M::out_dim}));
  EXPECT_EQ(y_rows.to_vector(), out_seq);
  const Tensor& dx_rows =
      m.vjp(ctx, Tensor::from_host({kB * kT, M::out_dim}, dy), InputGrad::Compute);
  EXPECT_EQ(dx_rows.to_vector(), grad_seq);
  std::size_t i = 0;
  for_each_param(m, [&](const std::string& name, Param& p) {
    EXPECT_EQ(p.grd.to_vector(), param_grads_seq[i++]) << name;
  });
}

TEST(SequenceShapes, LastDimensionModulesSeeBTimesTRows) {
  Block block(kLeafInit);
  expect_sequence_equals_rows(block);
}

TEST(SequenceShapes, SequenceInputsPassFiniteDifferences) {
  Block block(kLeafInit);
  testing::gradcheck(block, Tensor::from_host({2, 3, kC}, random_values(2 * 3 * kC, 9)));
}

TEST(SequenceShapes, AWrongWidthNamesTheModule) {
  Context ctx = Context::for_target(Target::Cpu);
  Linear<kC, 4> linear(kLeafInit);
  try {
    linear.forward(ctx, Tensor::from_host({kB, kT, kC + 1}, random_values(kB * kT * (kC + 1), 1)));
    FAIL() << "a [3, 5, 9] input was accepted by a Linear of width 8";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("Linear"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[3, 5, 9]"), std::string::npos) << e.what();
  }
}

TEST(SequenceShapes, DropoutMaskFollowsTheGlobalSampleAcrossASplitBatch) {
  // Samples 0..kB-1 of T rows each: the second half of the batch on its own (row_offset = its
  // first sample) draws the same mask as those rows of the whole batch.
  Dropout<kC, 400> dropout(kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  ctx.seed = 11;
  const std::vector<float> ones(kB * kT * kC, 1.0f);
  const std::vector<float> whole =
      dropout.forward(ctx, Tensor::from_host({kB, kT, kC}, ones)).to_vector();
  ctx.row_offset = 1;
  const std::vector<float> tail =
      dropout.forward(ctx, Tensor::from_host({kB - 1, kT, kC},
                                             std::vector<float>(ones.begin() + kT * kC, ones.end())))
          .to_vector();
  EXPECT_EQ(tail, std::vector<float>(whole.begin() + kT * kC, whole.end()));
  EXPECT_NE(std::vector<float>(whole.begin(), whole.begin() + kT * kC),
            std::vector<float>(whole.begin() + kT * kC, whole.begin() + 2 * kT * kC))
      << "samples draw different masks";
}

}  // namespace
}  // namespace noeira
