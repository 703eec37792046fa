// BatchNorm1D / BatchNorm2D: finite differences in training and evaluation, the statistics and
// running estimates PyTorch defines, the buffers in the walk, and synchronized statistics: N
// simulated ranks holding parts of a batch compute what one rank computes on the whole batch.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/buffer_sync.hpp"
#include "distributed/sim_process_group.hpp"
#include "leaf_util.hpp"
#include "nn/batchnorm.hpp"

namespace noeira {
namespace {

using testing::gradcheck;
using testing::kLeafInit;
using testing::random_input;

using Bn1 = BatchNorm1D<5>;
using Bn2 = BatchNorm2D<ImageShape{3, 4, 5}>;

std::vector<float> buffer_of(auto& m, const std::string& wanted) {
  std::vector<float> v;
  for_each_buffer(m, [&](const std::string& name, Tensor& t) {
    if (name == wanted) v = t.to_vector();
  });
  return v;
}

template <class M>
void check_training_gradients(std::uint32_t seed, std::initializer_list<std::int64_t> rows) {
  for (const std::int64_t n : rows) {
    SCOPED_TRACE("rows " + std::to_string(n));
    M m(kLeafInit);
    testing::randomize_params(m, seed);
    gradcheck(m, random_input(n, M::in_dim, seed + static_cast<std::uint32_t>(n), -2.0f, 3.0f),
              {}, seed);
  }
}

TEST(BatchNorm, TrainingGradientsMatchFiniteDifferences) {
  check_training_gradients<Bn1>(1, {2, 7, 13});
  check_training_gradients<Bn2>(2, {1, 3});  // one image still has 20 pixels per channel
  check_training_gradients<BatchNorm2D<ImageShape{2, 3, 3}>>(3, {5});
}

TEST(BatchNorm, EvaluationGradientsMatchFiniteDifferences) {
  Bn2 m(kLeafInit);
  testing::randomize_params(m, 4);
  Context ctx = Context::for_target(Target::Cpu);
  m.forward(ctx, random_input(6, Bn2::in_dim, 5, -1.0f, 4.0f));  // moves the running estimates
  ctx.mode = Mode::Eval;
  Tensor x = random_input(3, Bn2::in_dim, 6);
  const Tensor& y0 = m.forward(ctx, x);
  const std::vector<float> u = testing::random_values(static_cast<std::size_t>(y0.numel()), 7);
  const std::vector<float> dx =
      m.vjp(ctx, Tensor::from_host(y0.shape(), u), InputGrad::Compute).to_vector();
  std::vector<testing::FdTarget> targets;
  targets.push_back({"input", &x, dx, 8});
  testing::add_param_targets(m, targets, 9);
  testing::expect_finite_differences(
      targets, [&] { return testing::weighted_sum(m.forward(ctx, x), u); }, {});
}

TEST(BatchNorm, TrainingNormalizesEachChannelAndMovesTheRunningEstimates) {
  Bn2 m(kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  const std::int64_t rows = 4;
  const Tensor x = random_input(rows, Bn2::in_dim, 11, -3.0f, 5.0f);
  const std::vector<float> xs = x.to_vector();
  const std::vector<float> y = m.forward(ctx, x).to_vector();
  const std::vector<float> running_mean = buffer_of(m, "running_mean");
  const std::vector<float> running_var = buffer_of(m, "running_var");
  const std::int64_t pixels = 20;
  for (std::int64_t c = 0; c < 3; ++c) {
    double sx = 0, sxx = 0, sy = 0, syy = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t p = 0; p < pixels; ++p) {
        const auto i = static_cast<std::size_t>((r * 3 + c) * pixels + p);
        sx += xs[i];
        sxx += static_cast<double>(xs[i]) * xs[i];
        sy += y[i];
        syy += static_cast<double>(y[i]) * y[i];
      }
    }
    const double n = static_cast<double>(rows * pixels);
    const double mean = sx / n;
    const double var = sxx / n - mean * mean;
    EXPECT_NEAR(sy / n, 0.0, 1e-5) << "channel " << c;
    EXPECT_NEAR(syy / n, var / (var + 1e-5), 1e-4) << "channel " << c;
    EXPECT_NEAR(running_mean[static_cast<std::size_t>(c)], 0.1 * mean, 1e-5);
    EXPECT_NEAR(running_var[static_cast<std::size_t>(c)], 0.9 + 0.1 * var * n / (n - 1), 1e-5);
  }
  EXPECT_EQ(buffer_of(m, "num_batches_tracked"), std::vector<float>{1.0f});
  // Evaluation reads the running estimates and moves nothing.
  ctx.mode = Mode::Eval;
  m.forward(ctx, x);
  EXPECT_EQ(buffer_of(m, "running_mean"), running_mean);
  EXPECT_EQ(buffer_of(m, "num_batches_tracked"), std::vector<float>{1.0f});
}

TEST(BatchNorm, BuffersAreVisitedByNameAndParametersAreNotDecayed) {
  Bn1 m(kLeafInit);
  std::vector<std::string> params;
  for_each_param(m, [&](const std::string& name, Param& p) {
    params.push_back(name);
    EXPECT_EQ(p.decay, Decay::Skip) << name;
  });
  std::vector<std::string> buffers;
  for_each_buffer(m, [&](const std::string& name, Tensor&) { buffers.push_back(name); });
  EXPECT_EQ(params, (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(buffers,
            (std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"}));
  EXPECT_EQ(buffer_of(m, "running_var"), std::vector<float>(5, 1.0f));
}

// What one rank computes on the whole batch, and what `ranks` simulated ranks compute on their
// rows of it with synchronized statistics; rank `idle` (if any) holds a stand-in row only.
struct BnResult {
  std::vector<float> y, dx, dweight, dbias, running_mean, running_var;
};

BnResult run_whole(const Tensor& x, const Tensor& dy) {
  Bn2 m(kLeafInit);
  testing::randomize_params(m, 21);
  Context ctx = Context::for_target(Target::Cpu);
  BnResult r;
  r.y = m.forward(ctx, x).to_vector();
  r.dx = m.vjp(ctx, dy, InputGrad::Compute).to_vector();
  r.dweight = testing::param_grad(m, "weight");
  r.dbias = testing::param_grad(m, "bias");
  r.running_mean = buffer_of(m, "running_mean");
  r.running_var = buffer_of(m, "running_var");
  return r;
}

void expect_near_all(const std::vector<float>& a, const std::vector<float>& b, float tol,
                     const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], tol) << what << "[" << i << "]";
  }
}

TEST(BatchNorm, SynchronizedRanksComputeWhatOneRankComputesOnTheWholeBatch) {
  const std::int64_t rows = 5;
  const Tensor x = random_input(rows, Bn2::in_dim, 31, -2.0f, 3.0f);
  const Tensor dy = random_input(rows, Bn2::in_dim, 32);
  const BnResult whole = run_whole(x, dy);
  const std::int64_t width = Bn2::in_dim;
  // Ranks hold rows [0,2), [2,5) and a stand-in copy of row 0 (a rank a short batch left idle).
  const std::int64_t begin[] = {0, 2, 0};
  const std::int64_t count[] = {2, 3, 1};
  std::vector<BnResult> per_rank(3);
  dist::run_simulated(3, [&](dist::ProcessGroup& group) {
    const int rank = group.rank();
    const auto b = static_cast<std::size_t>(begin[rank] * width);
    const auto n = static_cast<std::size_t>(count[rank] * width);
    const std::vector<float> xs = x.to_vector();
    std::vector<float> dys = dy.to_vector();
    const Tensor xr = Tensor::from_host(image_batch_shape(count[rank], Bn2::in_image),
                                        std::vector<float>(xs.begin() + b, xs.begin() + b + n));
    if (rank == 2) std::fill(dys.begin(), dys.end(), 0.0f);  // its gradient scale is 0
    const Tensor dyr = Tensor::from_host(image_batch_shape(count[rank], Bn2::in_image),
                                         std::vector<float>(dys.begin() + b, dys.begin() + b + n));
    Bn2 m(kLeafInit);
    testing::randomize_params(m, 21);
    dist::SyncedBatchStats stats(group);
    Context ctx = Context::for_target(Target::Cpu);
    ctx.batch_stats = &stats;
    ctx.stand_in_rows = rank == 2;
    BnResult& r = per_rank[static_cast<std::size_t>(rank)];
    r.y = m.forward(ctx, xr).to_vector();
    r.dx = m.vjp(ctx, dyr, InputGrad::Compute).to_vector();
    r.dweight = testing::param_grad(m, "weight");
    r.dbias = testing::param_grad(m, "bias");
    r.running_mean = buffer_of(m, "running_mean");
    r.running_var = buffer_of(m, "running_var");
  });
  std::vector<float> y, dx;
  std::vector<float> dweight(3, 0.0f), dbias(3, 0.0f);
  for (int rank = 0; rank < 2; ++rank) {
    const BnResult& r = per_rank[static_cast<std::size_t>(rank)];
    y.insert(y.end(), r.y.begin(), r.y.end());
    dx.insert(dx.end(), r.dx.begin(), r.dx.end());
  }
  for (const BnResult& r : per_rank) {
    for (std::size_t c = 0; c < 3; ++c) {
      dweight[c] += r.dweight[c];
      dbias[c] += r.dbias[c];
    }
    // Every rank, the idle one too, holds the global batch's running estimates.
    expect_near_all(r.running_mean, whole.running_mean, 1e-6f, "running_mean");
    expect_near_all(r.running_var, whole.running_var, 1e-6f, "running_var");
  }
  expect_near_all(y, whole.y, 1e-5f, "y");
  expect_near_all(dx, whole.dx, 1e-5f, "dx");
  expect_near_all(dweight, whole.dweight, 1e-4f, "dweight");
  expect_near_all(dbias, whole.dbias, 1e-4f, "dbias");
}

TEST(BatchNorm, LocalStatisticsOfAStandInRowMoveNoRunningEstimate) {
  Bn1 m(kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  ctx.stand_in_rows = true;
  const std::vector<float> y = m.forward(ctx, random_input(1, Bn1::in_dim, 41)).to_vector();
  for (float v : y) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(buffer_of(m, "running_mean"), std::vector<float>(5, 0.0f));
  EXPECT_EQ(buffer_of(m, "num_batches_tracked"), std::vector<float>{0.0f});
}

}  // namespace
}  // namespace noeira
