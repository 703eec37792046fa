// A user's features that are integer ids, for a model whose first module is an embedding
// (FeatureEmbedding, nn/embedding.hpp; the loader in train/array_dataset.hpp). The properties:
// FeatureEmbedding's output is its table's rows side by side and its gradient their scatter-sum,
// computed here independently; a model of ids trains from int64 or int32 .npy ids on two
// simulated ranks under ZeRO-3 and lowers its loss, the same run either way, and eval of its
// model.h5 reads the ids again; and every input it cannot use is one line naming the file, sample
// and feature or the option.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "catalogue_test_util.hpp"
#include "cli_test_util.hpp"
#include "io_test_files.hpp"
#include "nn/activation.hpp"
#include "nn/embedding.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"
#include "saved_params.hpp"
#include "train/model_entry.hpp"
#include "train/run.hpp"

namespace noeira {
namespace {

using testing::expect_error_containing;
using testing::InstalledCatalogue;
using testing::TempDir;
using testing::write_npy_array;

constexpr std::int64_t kFeatures = 3, kVocab = 10, kWidth = 4;
using IdNet = Sequential<FeatureEmbedding<kFeatures, kVocab, kWidth>,
                         LinearTanh<kFeatures * kWidth, 16>, Linear<16, 2>>;
static_assert(input_vocab_of<IdNet>() == kVocab && IdNet::in_dim == kFeatures);
static_assert(input_vocab_of<Sequential<Linear<3, 2>>>() == 0);

TEST(FeatureEmbedding, OutputIsTheRowsSideBySideAndItsGradientTheirScatterSum) {
  Context ctx = Context::for_target(Target::Cpu);
  FeatureEmbedding<kFeatures, kVocab, kWidth> e(Init(Target::Cpu, InitSpec{}));
  Param *table = nullptr;
  for_each_param(e, [&](const std::string &name, Param &p) {
    EXPECT_EQ(name, "weight");
    table = &p;
  });
  ASSERT_NE(table, nullptr);
  const std::vector<float> t = table->val.to_vector();
  const std::vector<std::int32_t> ids = {1, 9, 1, 0, 4, 4};  // two rows, a repeated id
  const Tensor x = Tensor::from_host_ids({2, kFeatures}, ids, Target::Cpu);
  const Tensor &y = e.forward(ctx, x);
  ASSERT_EQ(y.shape(), (Shape{2, kFeatures * kWidth}));
  const std::vector<float> out = y.to_vector();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    for (std::int64_t d = 0; d < kWidth; ++d) {
      EXPECT_EQ(out[i * kWidth + d], t[ids[i] * kWidth + d]) << i << " " << d;
    }
  }
  std::vector<float> dy(out.size());
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = 0.25f * static_cast<float>(i) - 1.0f;
  table->grd.copy_from(std::vector<float>(static_cast<std::size_t>(kVocab * kWidth), 0.0f));
  (void)e.vjp(ctx, Tensor::from_host({2, kFeatures * kWidth}, dy), InputGrad::Skip);
  std::vector<float> expected(static_cast<std::size_t>(kVocab * kWidth), 0.0f);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    for (std::int64_t d = 0; d < kWidth; ++d) expected[ids[i] * kWidth + d] += dy[i * kWidth + d];
  }
  EXPECT_EQ(table->grd.to_vector(), expected);
  expect_error_containing([&] { (void)e.vjp(ctx, y, InputGrad::Compute); },
                          "token ids have no gradient");
}

// `count` samples of kFeatures ids and 2 targets that depend on them.
void write_ids(const std::filesystem::path &dir, const std::string &split, std::int64_t count,
               const char *descr = "<i8", std::int64_t bad_at = -1) {
  std::vector<std::int64_t> x;
  std::vector<float> y;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t a = (i * 7) % kVocab, b = (i * 3 + 1) % kVocab, c = (i / 3) % kVocab;
    x.insert(x.end(), {a, b, c});
    y.push_back(0.1f * static_cast<float>(a) - 0.05f * static_cast<float>(b));
    y.push_back(0.1f * static_cast<float>(c));
  }
  if (bad_at >= 0) x[static_cast<std::size_t>(bad_at * kFeatures + 2)] = kVocab;
  if (std::string(descr) == "<i4") {
    const std::vector<std::int32_t> narrow(x.begin(), x.end());
    write_npy_array(dir / (split + "_x.npy"), descr, {count, kFeatures}, narrow);
  } else {
    write_npy_array(dir / (split + "_x.npy"), descr, {count, kFeatures}, x);
  }
  write_npy_array(dir / (split + "_y.npy"), "<f4", {count, 2}, y);
}

TEST(IdFeatures, AModelOfIdsTrainsFromIntegerArraysAndEvaluatesItsModelFile) {
  const TempDir dir;
  const InstalledCatalogue installed(ModelCatalogue({model_entry<IdNet>("id-net", "ids")}));
  for (const char *descr : {"<i8", "<i4"}) {
    const std::filesystem::path data = dir / descr;
    std::filesystem::create_directories(data);
    write_ids(data, "train", 64, descr);
    write_ids(data, "test", 16, descr);
    TrainConfig cfg = testing::zero3_run(dir, "id-net", 6, 8);
    cfg.data_dir = data.string();
    cfg.lr = 3e-2;
    cfg.out = (dir / (std::string("run") + (descr[2] == '8' ? "8" : "4"))).string();
    std::vector<double> test_losses;
    TrainCallbacks watch;
    watch.on_epoch = [&](const EpochRecord &r) { test_losses.push_back(r.test_loss); };
    const TrainOutcome outcome = run_train(cfg, watch);
    ASSERT_EQ(test_losses.size(), 6u);
    EXPECT_LT(test_losses.back(), 0.5 * test_losses.front()) << descr;

    TrainConfig eval;
    eval.model.clear();
    eval.params = (std::filesystem::path(cfg.out) / "model.h5").string();
    eval.data = DatasetKind::Npy;
    eval.data_dir = cfg.data_dir;
    const EvalResult e = run_eval(eval);
    EXPECT_EQ(e.samples, 16);
    EXPECT_NEAR(e.loss, outcome.summary.last.test_loss, 1e-5 * e.loss) << descr;
    EXPECT_GT(e.r2, 0.9) << descr;
  }
  // The same ids, stored in 8 or 4 bytes: the same run.
  EXPECT_EQ(testing::saved_values<IdNet>(dir / "run8/model.h5", "id-net"),
            testing::saved_values<IdNet>(dir / "run4/model.h5", "id-net"));
}

TEST(IdFeatures, WhatAModelOfIdsCannotReadIsOneLineNamingIt) {
  const TempDir dir;
  const InstalledCatalogue installed(ModelCatalogue({model_entry<IdNet>("id-net", "ids")}));
  write_ids(dir.path(), "train", 24, "<i8", /*bad_at=*/5);
  write_ids(dir.path(), "test", 8);
  TrainConfig cfg = testing::zero3_run(dir, "id-net", 1, 8);
  expect_error_containing([&] { (void)run_train(cfg); },
                          "train_x.npy: sample 5 holds id 10 at feature 2, outside the model's "
                          "vocabulary [0, 10)");
  write_ids(dir.path(), "train", 24);
  for (auto [option, message] :
       {std::pair{+[](TrainConfig &c) { c.normalize = FeatureNormalize::Standardize; },
                  "--normalize: model 'id-net' takes ids"},
        std::pair{+[](TrainConfig &c) { c.feature_scale = 0.5; },
                  "--feature-scale/--feature-shift"},
        std::pair{+[](TrainConfig &c) { c.stream_data = true; }, "which are held, not streamed"},
        std::pair{+[](TrainConfig &c) {
                    c.data = DatasetKind::Mnist;
                    c.data_dir.clear();
                  },
                  "--data mnist holds images"}}) {
    TrainConfig refused = cfg;
    option(refused);
    expect_error_containing([&] { (void)run_train(refused); }, message);
  }
  // Float features where ids are wanted.
  testing::write_regression(dir.path(), "train", 24);
  expect_error_containing([&] { (void)run_train(cfg); },
                          "float features, but the model's first module is an embedding of 10 ids");
  EXPECT_FALSE(std::filesystem::exists(dir / "id-net"));  // nothing left behind
}

}  // namespace
}  // namespace noeira
