#pragma once
// The policy-training harness shared by the simulated policy tests and the MPI driver: a small
// MLP, a fixed data set, Adam, and one rank's run with the global batch split by rank.
#include <algorithm>
#include <cmath>
#include <vector>

#include "distributed/host_collectives.hpp"
#include "distributed/policy.hpp"
#include "distributed/rank_stream.hpp"
#include "distributed/sharded_step.hpp"
#include "distributed/units.hpp"
#include "gradcheck.hpp"
#include "loss/cross_entropy.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"
#include "optim/optimizer.hpp"

namespace noeira::dist::harness {

using Net = Sequential<LinearReLU<12, 16>, LinearTanh<16, 10>, Linear<10, 5>>;
constexpr std::int64_t kIn = 12;
constexpr std::int64_t kClasses = 5;
constexpr std::int64_t kBatch = 26;  // global batch: uneven rows at 3 and 4 ranks
constexpr int kBatches = 3;          // distinct global batches, cycled
constexpr int kSteps = 20;
constexpr float kLr = 1e-2f;

inline InitSpec init_spec(std::uint64_t seed) {
  return InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, seed};
}

inline OptimizerConfig adam() {
  OptimizerConfig c;
  c.kind = OptimizerKind::Adam;
  c.lr = kLr;
  c.weight_decay = 0.01f;  // decay on weights only: exercises Decay per piece
  return c;
}

struct Data {
  std::vector<float> x;              // [kBatches·kBatch, kIn]
  std::vector<std::int32_t> labels;  // [kBatches·kBatch]
  Data() : x(testing::random_values(kBatches * kBatch * kIn, 123)) {
    for (std::int64_t i = 0; i < kBatches * kBatch; ++i) {
      labels.push_back(static_cast<std::int32_t>((i * 7 + 3) % kClasses));
    }
  }
  // Rows [begin, end) of global batch `step`, on `target`.
  std::pair<Tensor, Tensor> rows(int step, std::int64_t begin, std::int64_t end,
                                 Target target = Target::Cpu) const {
    const std::int64_t base = (step % kBatches) * kBatch;
    std::vector<float> xs(x.begin() + (base + begin) * kIn, x.begin() + (base + end) * kIn);
    std::vector<std::int32_t> ls(labels.begin() + base + begin, labels.begin() + base + end);
    return {Tensor::from_host({end - begin, kIn}, xs, target),
            Tensor::from_host_ids({end - begin}, ls, target)};
  }
};

inline std::vector<float> walk_values(Net& model) {
  std::vector<float> out;
  for_each_param(model, [&](const std::string&, Param& p) {
    const std::vector<float> v = p.val.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  });
  return out;
}

// One rank, whole batch, no policy and no process group (a store of one rank owns the
// parameters and the optimizer state): the reference.
inline std::vector<float> train_single(std::vector<double>* losses, Target target = Target::Cpu) {
  const Data data;
  Net model(Init(target, init_spec(7)));
  Context ctx = Context::for_target(target);
  ParamStore store(walk_units(model), residency_of(Policy::Ddp), 0, 1, ctx);
  Optimizer opt(adam());
  CrossEntropyLoss loss;
  for (int s = 0; s < kSteps; ++s) {
    auto [x, labels] = data.rows(s, 0, kBatch, target);
    const Tensor& logits = model.forward(ctx, x);
    losses->push_back(loss.forward_backward(ctx, logits, labels, 1.0f / kBatch) / kBatch);
    model.vjp(ctx, loss.grad(), InputGrad::Skip);
    optimizer_step(store, opt, kLr);
  }
  return walk_values(model);
}

struct RunOptions {
  Policy policy = Policy::Ddp;
  int ranks = 1;
  double clip = 0.0;        // 0: no clipping
  bool rank_seeds = false;  // each rank initializes differently (the broadcast must fix it)
  bool hooks = true;        // unit drivers; false: plain forward / vjp
  std::int64_t bucket_elements = 64;  // several buckets for the small net
  Target target = Target::Cpu;        // the group's buffer target
  DType reduce_dtype = DType::F32;     // the gradient reductions' wire (--reduce-dtype)
  DType grad_dtype = DType::F32;       // what the gradients are held in (--grad-dtype)
};

// Everything one rank does in a run: build, broadcast, train kSteps, report. The same code runs
// under the simulated backend (test_dist_policy.cpp) and under mpiexec (dist_mpi_driver.cpp).
struct RankResult {
  std::vector<float> params;            // full parameters after the run
  std::vector<float> before_broadcast;  // local initial values
  std::vector<double> losses;           // global mean loss per step
  std::vector<double> norms;            // gradient norm per step
  MemoryReport memory;
};

inline RankResult train_rank(ProcessGroup& pg, const RunOptions& o) {
  const Data data;
  RankResult result;
  const auto r = static_cast<std::uint64_t>(pg.rank());
  const RankStream stream(pg, o.target);  // as the trainer's ranks: destroyed last
  Net model(Init(o.target, init_spec(o.rank_seeds ? 7 + 1000 * r : 7)));
  result.before_broadcast = walk_values(model);
  Context ctx = Context::for_target(o.target, stream.get());
  PolicyOptions options{o.bucket_elements, 32, 0, true, o.reduce_dtype};
  options.grad_dtype = o.grad_dtype;
  ShardingPolicy policy(o.policy, walk_units(model), pg, ctx, options);
  policy.broadcast_initial_parameters();
  Optimizer opt(adam());
  CrossEntropyLoss loss;
  // docs/design.md, "Contracts the tests pin": rank r takes rows [r·B/N, (r+1)·B/N) of the global batch.
  const std::int64_t begin = pg.rank() * kBatch / pg.size();
  const std::int64_t end = (pg.rank() + 1) * kBatch / pg.size();
  for (int s = 0; s < kSteps; ++s) {
    auto [x, labels] = data.rows(s, begin, end, o.target);
    const Tensor& logits = o.hooks ? forward_units(model, ctx, x, policy) : model.forward(ctx, x);
    double loss_sum = loss.forward_backward(ctx, logits, labels, 1.0f / kBatch);
    if (o.hooks) {
      vjp_units(model, ctx, loss.grad(), InputGrad::Skip, policy);
    } else {
      model.vjp(ctx, loss.grad(), InputGrad::Skip);
    }
    policy.reduce_gradients();
    const double norm =
        o.clip > 0 ? policy.clip_grad_norm(o.clip) : std::sqrt(policy.grad_sum_squares());
    policy.step(opt, kLr);
    loss_sum = sum_over_ranks(pg, loss_sum);
    result.losses.push_back(loss_sum / kBatch);
    result.norms.push_back(norm);
  }
  result.memory = policy.memory_report();
  result.params = policy.full_parameters();
  return result;
}

// A model large enough that per-parameter alignment is noise next to Ψ.
using Wide = Sequential<LinearReLU<784, 64>, Linear<64, 10>>;

// One Adam step of Wide under a policy, then the rank's memory report.
inline MemoryReport memory_after_one_step(ProcessGroup& pg, Policy p,
                                         Target target = Target::Cpu,
                                         const PolicyOptions& options = {}) {
  Wide model(Init(target, init_spec(3)));
  Context ctx = Context::for_target(target);
  ShardingPolicy policy(p, walk_units(model), pg, ctx, options);
  policy.broadcast_initial_parameters();
  Optimizer opt(adam());
  Tensor x = Tensor::from_host({4, 784}, testing::random_values(4 * 784, 5), target);
  Tensor labels = Tensor::from_host_ids({4}, std::vector<std::int32_t>{1, 2, 3, 4}, target);
  CrossEntropyLoss loss;
  const Tensor& logits = forward_units(model, ctx, x, policy);
  loss.forward_backward(ctx, logits, labels, 0.25f);
  vjp_units(model, ctx, loss.grad(), InputGrad::Skip, policy);
  policy.reduce_gradients();
  policy.step(opt, kLr);
  return policy.memory_report();
}

inline bool within_five_percent(double got, double want) {
  return std::fabs(got - want) <= 0.05 * want;
}

inline double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

}  // namespace noeira::dist::harness
