#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "gradcheck.hpp"
#include "distributed/sharded_step.hpp"
#include "distributed/units.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"
#include "optim/clip.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"

namespace noeira {
namespace {

using testing::random_values;

Context cpu() { return Context::for_target(Target::Cpu); }

// One flat buffer of weights with its gradient and the optimizer state the update needs: what
// the parameter store hands Optimizer::update for a run of owned elements.
struct FlatParam {
  Tensor val, grd, m, v;  // m / v undefined until an update needs them
  Decay decay = Decay::Apply;
  bool has_moments() const { return m.defined() && v.defined(); }
};

FlatParam make_param(std::vector<float> w, std::vector<float> g, Decay decay = Decay::Apply) {
  const Shape shape{static_cast<std::int64_t>(w.size())};
  FlatParam p{Tensor::from_host(shape, w), Tensor::from_host(shape, g), {}, {}, decay};
  return p;
}

// Allocates m / v only where the optimizer uses them, as the store does, then updates.
void update(const Optimizer& opt, Context& ctx, FlatParam& p, float lr) {
  if (opt.uses_m() && !p.m.defined()) p.m = Tensor(p.val.shape());
  if (opt.uses_v() && !p.v.defined()) p.v = Tensor(p.val.shape());
  opt.update(*ctx.k, ctx.stream, p.val.data(), p.m.defined() ? p.m.data() : nullptr,
             p.v.defined() ? p.v.data() : nullptr, p.grd.data(), p.val.numel(), p.decay, lr);
}

OptimizerConfig sgd(float lr, float momentum = 0.0f, bool nesterov = false, float wd = 0.0f) {
  OptimizerConfig c;
  c.kind = OptimizerKind::Sgd;
  c.lr = lr;
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = wd;
  return c;
}

OptimizerConfig adam(OptimizerKind kind, float lr, float wd = 0.0f) {
  OptimizerConfig c;
  c.kind = kind;
  c.lr = lr;
  c.weight_decay = wd;
  return c;
}

void expect_all_float_eq(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << "element " << i;
}

// --- SGD -------------------------------------------------------------------------------------

TEST(Sgd, OneStepIsWMinusLrG) {
  Context ctx = cpu();
  Optimizer opt(sgd(0.1f));
  FlatParam p = make_param({1, -2, 3}, {0.5f, 0.5f, -1});
  opt.begin_step();
  update(opt, ctx, p, 0.1f);
  expect_all_float_eq(p.val.to_vector(), {0.95f, -2.05f, 3.1f});
}

TEST(Sgd, CoupledWeightDecayOnlyWhereApplied) {
  Context ctx = cpu();
  Optimizer opt(sgd(0.1f, 0.0f, false, 0.5f));
  FlatParam w = make_param({2, -4}, {1, 1}, Decay::Apply);
  FlatParam b = make_param({2, -4}, {1, 1}, Decay::Skip);
  opt.begin_step();
  update(opt, ctx, w, 0.1f);
  update(opt, ctx, b, 0.1f);
  // g + wd·w = {2, -1}
  expect_all_float_eq(w.val.to_vector(), {1.8f, -3.9f});
  expect_all_float_eq(b.val.to_vector(), {1.9f, -4.1f});
}

TEST(Sgd, MomentumTwoSteps) {
  Context ctx = cpu();
  const float lr = 0.1f, mu = 0.9f;
  for (bool nesterov : {false, true}) {
    Optimizer opt(sgd(lr, mu, nesterov));
    FlatParam p = make_param({1, 2}, {1, -2});
    opt.begin_step();
    update(opt, ctx, p, lr);
    p.grd.copy_from(std::vector<float>{0.5f, 3});
    opt.begin_step();
    update(opt, ctx, p, lr);
    // buf1 = g1; buf2 = mu·g1 + g2. Plain: step with buf; Nesterov: with g + mu·buf.
    std::vector<float> want(2);
    const float g1[2] = {1, -2}, g2[2] = {0.5f, 3}, w0[2] = {1, 2};
    for (int i = 0; i < 2; ++i) {
      const float buf1 = g1[i], buf2 = mu * buf1 + g2[i];
      const float s1 = nesterov ? g1[i] + mu * buf1 : buf1;
      const float s2 = nesterov ? g2[i] + mu * buf2 : buf2;
      want[static_cast<std::size_t>(i)] = w0[i] - lr * s1 - lr * s2;
    }
    expect_all_float_eq(p.val.to_vector(), want);
    EXPECT_TRUE(p.m.defined()) << "momentum buffer";
    EXPECT_FALSE(p.v.defined()) << "SGD never needs a second moment";
    expect_all_float_eq(p.m.to_vector(), {mu * 1 + 0.5f, mu * -2 + 3});
  }
}

TEST(Sgd, PlainSgdAllocatesNoState) {
  Context ctx = cpu();
  Sequential<Linear<3, 4>, Linear<4, 2>> net(Init(Target::Cpu, InitSpec{}));
  dist::ParamStore store(dist::walk_units(net), dist::residency_of(dist::Policy::Ddp), 0, 1, ctx);
  Optimizer opt(sgd(0.1f));
  EXPECT_FALSE(opt.needs_moments());
  dist::optimizer_step(store, opt, 0.1f);
  dist::optimizer_step(store, opt, 0.1f);
  EXPECT_FALSE(store.has_state(dist::State::M));
  EXPECT_FALSE(store.has_state(dist::State::V));
  EXPECT_EQ(store.state_bytes(), 0);
  // SGD with momentum: the first moment only.
  Optimizer with_momentum(sgd(0.1f, 0.9f));
  dist::optimizer_step(store, with_momentum, 0.1f);
  EXPECT_TRUE(store.has_state(dist::State::M));
  EXPECT_FALSE(store.has_state(dist::State::V));
}

// --- Adam / AdamW ----------------------------------------------------------------------------

// Adam in double, straight from the paper, for t steps with the given gradients.
std::vector<double> adam_reference(std::vector<double> w,
                                   const std::vector<std::vector<double>>& gs, double lr,
                                   double b1, double b2, double eps) {
  std::vector<double> m(w.size(), 0.0), v(w.size(), 0.0);
  for (std::size_t t = 1; t <= gs.size(); ++t) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double g = gs[t - 1][i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mh = m[i] / (1 - std::pow(b1, static_cast<double>(t)));
      const double vh = v[i] / (1 - std::pow(b2, static_cast<double>(t)));
      w[i] -= lr * mh / (std::sqrt(vh) + eps);
    }
  }
  return w;
}

TEST(Adam, FirstStepIsLrTimesSignOfGradient) {
  Context ctx = cpu();
  const float lr = 0.01f;
  Optimizer opt(adam(OptimizerKind::Adam, lr));
  FlatParam p = make_param({1, -1, 0.5f}, {3, -0.2f, 1e-3f});
  EXPECT_FALSE(p.has_moments());
  opt.begin_step();
  update(opt, ctx, p, lr);
  EXPECT_TRUE(p.has_moments());
  const std::vector<float> w = p.val.to_vector();
  // m̂ = g, v̂ = g², so the step is lr · g / (|g| + eps).
  EXPECT_NEAR(w[0], 1 - lr, 1e-6);
  EXPECT_NEAR(w[1], -1 + lr, 1e-6);
  EXPECT_NEAR(w[2], 0.5 - lr * 1e-3 / (1e-3 + 1e-8), 1e-6);
  const std::vector<double> ref =
      adam_reference({1, -1, 0.5}, {{3, -0.2f, 1e-3f}}, lr, 0.9f, 0.999f, 1e-8f);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(w[i], ref[i], 1e-6 * std::abs(ref[i]) + 1e-7);
}

TEST(Adam, ThreeStepsMatchTheReference) {
  Context ctx = cpu();
  const float lr = 0.05f;
  Optimizer opt(adam(OptimizerKind::Adam, lr));
  const std::vector<std::vector<float>> gs = {{1, -2, 0.3f}, {-0.5f, -1, 0.3f}, {2, 0.1f, -0.3f}};
  FlatParam p = make_param({0.2f, -0.7f, 1.5f}, gs[0]);
  for (const auto& g : gs) {
    p.grd.copy_from(g);
    opt.begin_step();
    update(opt, ctx, p, lr);
  }
  std::vector<std::vector<double>> gd;
  for (const auto& g : gs) gd.emplace_back(g.begin(), g.end());
  const std::vector<double> ref = adam_reference({0.2f, -0.7f, 1.5f}, gd, lr, 0.9f, 0.999f, 1e-8f);
  const std::vector<float> w = p.val.to_vector();
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(w[i], ref[i], 1e-6) << i;
}

TEST(Adam, CoupledDecayActsThroughTheGradient) {
  Context ctx = cpu();
  const float lr = 0.01f;
  Optimizer opt(adam(OptimizerKind::Adam, lr, 0.1f));
  FlatParam w = make_param({2, -3}, {0, 0}, Decay::Apply);
  FlatParam b = make_param({2, -3}, {0, 0}, Decay::Skip);
  opt.begin_step();
  update(opt, ctx, w, lr);
  update(opt, ctx, b, lr);
  // g' = wd·w, normalized by Adam: the first step is lr·sign(w).
  EXPECT_NEAR(w.val.to_vector()[0], 2 - lr, 1e-6);
  EXPECT_NEAR(w.val.to_vector()[1], -3 + lr, 1e-6);
  EXPECT_EQ(b.val.to_vector(), (std::vector<float>{2, -3}));
}

TEST(AdamW, DecaysOnlyParamsWithDecayApply) {
  Context ctx = cpu();
  const float lr = 0.01f, wd = 0.1f;
  Optimizer opt(adam(OptimizerKind::AdamW, lr, wd));
  // Zero gradients: the Adam part is exactly 0, leaving only w ← w - lr·wd·w.
  FlatParam w = make_param({2, -3}, {0, 0}, Decay::Apply);
  FlatParam b = make_param({2, -3}, {0, 0}, Decay::Skip);
  opt.begin_step();
  update(opt, ctx, w, lr);
  update(opt, ctx, b, lr);
  expect_all_float_eq(w.val.to_vector(), {2 - lr * wd * 2, -3 - lr * wd * -3});
  EXPECT_EQ(b.val.to_vector(), (std::vector<float>{2, -3}));
}

TEST(AdamW, BiasesOfALayerAreNotDecayed) {
  Context ctx = cpu();
  Linear<3, 2> lin(Init(Target::Cpu, InitSpec{}));
  const std::vector<float> bias0 = {0.5f, -0.5f};
  std::vector<float> weight0;
  for_each_param(lin, [&](const std::string& name, Param& p) {
    if (name == "bias") p.val.copy_from(bias0);
    else weight0 = p.val.to_vector();
    p.grd.zero();
  });
  dist::ParamStore store(dist::walk_units(lin), dist::residency_of(dist::Policy::Ddp), 0, 1, ctx);
  Optimizer opt(adam(OptimizerKind::AdamW, 0.1f, 0.5f));
  dist::optimizer_step(store, opt, 0.1f);
  for_each_param(lin, [&](const std::string& name, Param& p) {
    if (name == "bias") {
      EXPECT_EQ(p.val.to_vector(), bias0);
    } else {
      std::vector<float> want = weight0;
      for (float& x : want) x -= 0.1f * 0.5f * x;
      expect_all_float_eq(p.val.to_vector(), want);
    }
  });
}

TEST(Adam, UpdateBeforeBeginStepIsAnError) {
  Context ctx = cpu();
  Optimizer opt(adam(OptimizerKind::Adam, 0.1f));
  FlatParam p = make_param({1}, {1});
  EXPECT_THROW(update(opt, ctx, p, 0.1f), Error);
}

TEST(Optimizer, StepStateAfterKStepsIsBetaToTheK) {
  Optimizer opt(adam(OptimizerKind::Adam, 0.1f));
  for (int k = 1; k <= 50; ++k) {
    opt.begin_step();
    EXPECT_EQ(opt.state().t, k);
    const double b1k = std::pow(static_cast<double>(0.9f), k);
    const double b2k = std::pow(static_cast<double>(0.999f), k);
    EXPECT_NEAR(opt.state().beta1_pow, b1k, 1e-14 * b1k);
    EXPECT_NEAR(opt.state().beta2_pow, b2k, 1e-14 * b2k);
  }
}

TEST(Optimizer, ResumedStateMatchesBitForBit) {
  Context ctx = cpu();
  const std::vector<float> w0 = random_values(9, 1);
  FlatParam a = make_param(w0, w0), b = make_param(w0, w0);
  Optimizer straight(adam(OptimizerKind::AdamW, 0.01f, 0.01f));
  Optimizer first(adam(OptimizerKind::AdamW, 0.01f, 0.01f));
  for (int s = 0; s < 3; ++s) {
    const std::vector<float> g = random_values(9, 10 + s);
    a.grd.copy_from(g);
    b.grd.copy_from(g);
    straight.begin_step();
    update(straight, ctx, a, 0.01f);
    first.begin_step();
    update(first, ctx, b, 0.01f);
  }
  Optimizer resumed(adam(OptimizerKind::AdamW, 0.01f, 0.01f));
  resumed.set_state(first.state());
  for (int s = 3; s < 6; ++s) {
    const std::vector<float> g = random_values(9, 10 + s);
    a.grd.copy_from(g);
    b.grd.copy_from(g);
    straight.begin_step();
    update(straight, ctx, a, 0.01f);
    resumed.begin_step();
    update(resumed, ctx, b, 0.01f);
  }
  EXPECT_EQ(a.val.to_vector(), b.val.to_vector());
  EXPECT_EQ(a.m.to_vector(), b.m.to_vector());
  EXPECT_EQ(a.v.to_vector(), b.v.to_vector());
  EXPECT_THROW(resumed.set_state(OptimizerState{-1, 1.0, 1.0}), InputError);
  EXPECT_THROW(resumed.set_state(OptimizerState{3, -0.1, 0.5}), InputError);
  EXPECT_THROW(resumed.set_state(OptimizerState{3, 0.5, 1.5}), InputError);
  EXPECT_THROW(resumed.set_state(OptimizerState{0, 0.9, 1.0}), InputError);
  // --beta1 0 (allowed: no momentum) makes beta1^t zero from the first step, and a small beta's
  // power underflows to zero: such runs' checkpoints resume too.
  OptimizerConfig no_momentum = adam(OptimizerKind::AdamW, 0.01f, 0.01f);
  no_momentum.beta1 = 0.0f;
  Optimizer zero_beta(no_momentum);
  zero_beta.begin_step();
  ASSERT_EQ(zero_beta.state().beta1_pow, 0.0);
  EXPECT_NO_THROW(resumed.set_state(zero_beta.state()));
  no_momentum.beta1 = 0.5f;
  Optimizer small_beta(no_momentum);
  for (int s = 0; s < 1100; ++s) small_beta.begin_step();
  ASSERT_EQ(small_beta.state().beta1_pow, 0.0);
  EXPECT_NO_THROW(resumed.set_state(small_beta.state()));
}

TEST(Optimizer, ShardedFlatUpdatesMatchTheWholeParameter) {
  Context ctx = cpu();
  const std::vector<float> w0 = random_values(10, 2), g = random_values(10, 3);
  FlatParam whole = make_param(w0, g);
  FlatParam sharded = make_param(w0, g);
  sharded.m = Tensor({10});
  sharded.v = Tensor({10});
  Optimizer opt(adam(OptimizerKind::Adam, 0.01f));
  opt.begin_step();
  update(opt, ctx, whole, 0.01f);
  // Two uneven shards, each with its slices of m and v.
  for (auto [begin, n] : {std::pair<std::int64_t, std::int64_t>{0, 4}, {4, 6}}) {
    opt.update(*ctx.k, ctx.stream, sharded.val.data() + begin, sharded.m.data() + begin,
               sharded.v.data() + begin, sharded.grd.data() + begin, n, Decay::Apply, 0.01f);
  }
  EXPECT_EQ(whole.val.to_vector(), sharded.val.to_vector());
  EXPECT_EQ(whole.v.to_vector(), sharded.v.to_vector());
}

TEST(Optimizer, ConfigurationErrorsNameTheField) {
  OptimizerConfig c = sgd(0.1f, 0.0f, true);
  EXPECT_THROW(Optimizer{c}, InputError);  // nesterov without momentum
  OptimizerConfig b = adam(OptimizerKind::Adam, 0.1f);
  b.beta1 = 1.0f;
  try {
    Optimizer o(b);
    (void)o;
    FAIL() << "beta1 = 1 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("beta1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Optimizer{adam(OptimizerKind::Adam, -1.0f)}, InputError);
}

TEST(Optimizer, KindNamesRoundTrip) {
  for (OptimizerKind k : {OptimizerKind::Sgd, OptimizerKind::Adam, OptimizerKind::AdamW}) {
    EXPECT_EQ(parse_optimizer_kind(to_string(k)), k);
  }
  EXPECT_THROW(parse_optimizer_kind("rmsprop"), InputError);
  EXPECT_THROW(parse_optimizer_kind("Adam"), InputError);
}

// --- clipping --------------------------------------------------------------------------------

using ClipNet = Sequential<Linear<3, 4>, Linear<4, 2>>;

double set_random_grads(ClipNet& net) {
  double ss = 0.0;
  std::uint32_t seed = 20;
  for_each_param(net, [&](const std::string&, Param& p) {
    const std::vector<float> g = random_values(static_cast<std::size_t>(p.numel()), seed++);
    p.grd.copy_from(g);
    for (float x : g) ss += static_cast<double>(x) * x;
  });
  return ss;
}

std::vector<std::vector<float>> grads_of(ClipNet& net) {
  std::vector<std::vector<float>> out;
  for_each_param(net, [&](const std::string&, Param& p) { out.push_back(p.grd.to_vector()); });
  return out;
}

TEST(Clip, SumOfSquaresMatchesTheHostSum) {
  Context ctx = cpu();
  ClipNet net(Init(Target::Cpu, InitSpec{}));
  const double ss = set_random_grads(net);
  EXPECT_NEAR(grad_sum_squares(net, ctx), ss, 1e-12 * ss);
}

TEST(Clip, ScalesToTheRequestedNorm) {
  Context ctx = cpu();
  ClipNet net(Init(Target::Cpu, InitSpec{}));
  const double norm = std::sqrt(set_random_grads(net));
  const double max_norm = norm / 3.0;
  EXPECT_NEAR(clip_grad_norm(net, ctx, max_norm), norm, 1e-12 * norm);
  const double after = std::sqrt(grad_sum_squares(net, ctx));
  EXPECT_NEAR(after, max_norm, 1e-6 * max_norm);
}

TEST(Clip, LeavesGradientsBelowTheLimitAlone) {
  Context ctx = cpu();
  ClipNet net(Init(Target::Cpu, InitSpec{}));
  const double norm = std::sqrt(set_random_grads(net));
  const auto before = grads_of(net);
  EXPECT_NEAR(clip_grad_norm(net, ctx, norm * 1.01), norm, 1e-12 * norm);
  EXPECT_EQ(grads_of(net), before);
  EXPECT_THROW(clip_grad_norm(net, ctx, 0.0), InputError);
}

// --- schedules -------------------------------------------------------------------------------

TEST(LrSchedule, ConstantIsBaseLr) {
  const LrSchedule s{ScheduleKind::Constant, 0.3f, 0, 0, 0.0f};
  EXPECT_EQ(s.lr_at(0), 0.3f);
  EXPECT_EQ(s.lr_at(123456), 0.3f);
}

TEST(LrSchedule, WarmupRampsLinearlyThenHolds) {
  const LrSchedule s{ScheduleKind::Warmup, 1.0f, 10, 0, 0.0f};
  EXPECT_FLOAT_EQ(s.lr_at(0), 0.1f);
  EXPECT_FLOAT_EQ(s.lr_at(4), 0.5f);
  EXPECT_FLOAT_EQ(s.lr_at(9), 1.0f);
  EXPECT_FLOAT_EQ(s.lr_at(10), 1.0f);
  EXPECT_FLOAT_EQ(s.lr_at(1000), 1.0f);
}

TEST(LrSchedule, WarmupCosineKeyPoints) {
  const LrSchedule s{ScheduleKind::WarmupCosine, 1.0f, 10, 110, 0.1f};
  EXPECT_FLOAT_EQ(s.lr_at(0), 0.1f);
  EXPECT_FLOAT_EQ(s.lr_at(9), 1.0f);    // end of warmup
  EXPECT_FLOAT_EQ(s.lr_at(10), 1.0f);   // cosine at p = 0
  EXPECT_FLOAT_EQ(s.lr_at(60), 0.55f);  // p = 1/2: halfway between base and min
  const double quarter = 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi / 4));  // p = 1/4
  EXPECT_FLOAT_EQ(s.lr_at(35), static_cast<float>(quarter));
  EXPECT_FLOAT_EQ(s.lr_at(110), 0.1f);  // total_steps
  EXPECT_FLOAT_EQ(s.lr_at(5000), 0.1f);
  // No warmup: starts at base_lr.
  const LrSchedule c{ScheduleKind::WarmupCosine, 2.0f, 0, 4, 0.0f};
  EXPECT_FLOAT_EQ(c.lr_at(0), 2.0f);
  EXPECT_FLOAT_EQ(c.lr_at(2), 1.0f);
  EXPECT_FLOAT_EQ(c.lr_at(4), 0.0f);
}

TEST(LrSchedule, InvalidSchedulesAndNamesAreInputErrors) {
  const LrSchedule bad{ScheduleKind::WarmupCosine, 1.0f, 10, 10, 0.0f};
  EXPECT_THROW(bad.validate(), InputError);
  EXPECT_THROW(bad.lr_at(20), InputError);
  EXPECT_THROW((LrSchedule{ScheduleKind::WarmupCosine, 1.0f, 0, 10, 2.0f}.validate()), InputError);
  EXPECT_THROW((LrSchedule{ScheduleKind::Constant, 1.0f, 0, 0, 0.0f}.lr_at(-1)), InputError);
  for (ScheduleKind k :
       {ScheduleKind::Constant, ScheduleKind::Warmup, ScheduleKind::WarmupCosine}) {
    EXPECT_EQ(parse_schedule_kind(to_string(k)), k);
  }
  EXPECT_THROW(parse_schedule_kind("linear"), InputError);
}

}  // namespace
}  // namespace noeira
