// The parameter store's contract (distributed/param_store.hpp): it adopts the walk's values, its
// handles are views of its buffers, a handle whose memory the store does not hold now is an error
// naming the parameter (never another unit's bytes), and it holds optimizer state only where an
// optimizer asks for it, in the extent the residency gives.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dist_training.hpp"

namespace noeira::dist {
namespace {

using harness::Net;

std::vector<std::vector<float>> values_of(Net& model) {
  std::vector<std::vector<float>> out;
  for_each_param(model, [&](const std::string&, Param& p) { out.push_back(p.val.to_vector()); });
  return out;
}

Context cpu() { return Context::for_target(Target::Cpu); }

TEST(ParamStore, AdoptsTheWalkAndItsHandlesAreViewsOfTheStore) {
  Net model(Init(Target::Cpu, harness::init_spec(3)));
  const std::vector<std::vector<float>> initial = values_of(model);
  const Context ctx = cpu();
  ParamStore store(walk_units(model), residency_of(Policy::Ddp), 0, 1, ctx);
  EXPECT_EQ(values_of(model), initial);
  // A write into the store's buffer is what the handle reads: one owner, no copy.
  float* first = store.owned_values(0);
  first[0] = 42.0f;
  Param* weight = walk_units(model).params[0].param;
  EXPECT_EQ(weight->val.to_vector()[0], 42.0f);
  EXPECT_EQ(weight->val.data(), first);
  EXPECT_EQ(weight->grd.data(), store.owned_grads(0));
}

TEST(ParamStore, ZeroThreeValuesExistOnlyWhileTheirUnitIsBound) {
  Net model(Init(Target::Cpu, harness::init_spec(3)));
  const std::vector<std::vector<float>> initial = values_of(model);
  const Context ctx = cpu();
  ParamStore store(walk_units(model), residency_of(Policy::Zero3), 1, 3, ctx);
  Param* weight = walk_units(model).params[0].param;
  EXPECT_EQ(weight->shape(), (Shape{16, 12})) << "an absent handle keeps its shape";
  try {
    (void)weight->val.data();
    FAIL() << "reading a ZeRO-3 value that is not gathered must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 0.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not gathered"), std::string::npos) << e.what();
  }
  EXPECT_THROW(store.bind_values(0), Error) << "no gather buffer holds unit 0 yet";
  // What a gather does: the unit's full values into a gather buffer, then bind.
  ASSERT_EQ(store.gather_buffers(), 1u);
  const FlatLayout& unit = store.layout().units[0];
  ctx.k->copy(nullptr, store.gather_buffer(0), store.initial_values(),
              static_cast<std::size_t>(unit.padded_size) * sizeof(float));
  store.set_held(0, 0);
  EXPECT_EQ(store.buffer_holding(0), 0u);
  store.bind_values(0);
  EXPECT_EQ(weight->val.to_vector(), initial[0]);
  store.release_values(0);
  EXPECT_THROW((void)weight->val.data(), Error);
  // The other units were never bound.
  EXPECT_THROW((void)walk_units(model).params[2].param->val.data(), Error);
  // The slices change (a step, a load): the gathered copy is forgotten, never read stale.
  store.forget_gathered();
  EXPECT_EQ(store.buffer_holding(0), ParamStore::kNone);
  EXPECT_THROW(store.bind_values(0), Error);
}

TEST(ParamStore, SlicedGradientsExistOnlyDuringTheirUnitsVjp) {
  Net model(Init(Target::Cpu, harness::init_spec(3)));
  const Context ctx = cpu();
  ParamStore store(walk_units(model), residency_of(Policy::Zero2), 0, 2, ctx);
  Param* bias = walk_units(model).params[3].param;  // "1.bias", unit 1
  EXPECT_NO_THROW((void)bias->val.data()) << "ZeRO-2 keeps every value";
  try {
    (void)bias->grd.data();
    FAIL() << "a ZeRO-2 gradient outside its unit's vjp must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 1.bias"), std::string::npos) << e.what();
  }
  store.bind_grads(1);
  // Bound into the transient unit buffer, at the parameter's unit-local offset.
  const std::int64_t local = store.layout().full_offset_of(3) - store.layout().full_offset[1];
  EXPECT_EQ(bias->grd.data(), store.unit_grads(1) + local);
  store.release_grads(1);
  EXPECT_THROW((void)bias->grd.data(), Error);
}

TEST(ParamStore, OptimizerStateOnlyWhereAskedInTheResidencysExtent) {
  for (Policy policy : {Policy::Ddp, Policy::Zero1, Policy::Zero3}) {
    SCOPED_TRACE(std::string(to_string(policy)));
    Net model(Init(Target::Cpu, harness::init_spec(3)));
    ParamStore store(walk_units(model), residency_of(policy), 2, 4, cpu());
    EXPECT_EQ(store.state_bytes(), 0);
    EXPECT_EQ(store.owned_state(State::M, 0), nullptr);
    EXPECT_TRUE(store.pieces(State::M, Coverage::Held).empty());
    store.ensure_state(true, false);
    const std::int64_t per_buffer =
        policy == Policy::Ddp ? store.layout().full_size : store.layout().shard_size;
    EXPECT_EQ(store.state_bytes(), per_buffer * 4);
    EXPECT_TRUE(store.has_state(State::M));
    EXPECT_FALSE(store.has_state(State::V));
    store.ensure_state(true, true);
    EXPECT_EQ(store.state_bytes(), 2 * per_buffer * 4);
  }
}

}  // namespace
}  // namespace noeira::dist
