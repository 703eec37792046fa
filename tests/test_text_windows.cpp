// Training and validation windows (train/text_windows.hpp, train/language_model.hpp): token ids
// are checked once at upload; a window's start is a function of (seed, stream, step, row) only,
// so the global batch is the same for one rank and three, and a fresh task continues exactly
// where another left off; targets are the inputs shifted by one; the validation windows are the
// same at every evaluation; the CUDA gather matches the CPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "expect_error.hpp"
#include "gpu_skip.hpp"
#include "text_test_util.hpp"
#include "train/language_model.hpp"

namespace noeira {
namespace {

using testing::counting_tokens;
using testing::expect_input_error;

constexpr std::int64_t kBlock = 5;
constexpr std::int64_t kBatch = 7;
constexpr std::int64_t kTrainTokens = 300;
constexpr std::int64_t kValidationTokens = 40;
constexpr std::uint64_t kSeed = 11;

LanguageModelOptions options() {
  return {.steps = 12,
          .eval_every = 4,
          .eval_batches = 3,
          .batch = kBatch,
          .block = kBlock,
          .seed = kSeed,
          .loss = {}};
}

// Training and validation tokens whose ids are their positions, in the training split's
// vocabulary.
ResidentText counting_text(Target target = Target::Cpu) {
  return ResidentText{counting_tokens("count/train", kTrainTokens, kTrainTokens, target),
                      counting_tokens("count/validation", kValidationTokens, kTrainTokens, target)};
}

struct Windows {
  std::vector<std::int32_t> ids;      // [rows, block]
  std::vector<std::int32_t> targets;  // [rows · block]
};

// Step s of `period` as ranks 0..world-1 see it, their rows concatenated in rank order; each
// rank has its own task, as in a run.
Windows global_batch_of(const ResidentText& text, std::int64_t period, std::int64_t s, int world) {
  Windows all;
  for (int r = 0; r < world; ++r) {
    LanguageModelTask task(text.train, text.validation, options());
    task.begin_period(period, text.train.ids.target());
    const StepRows rows = task.load(s, r, world, nullptr);
    EXPECT_EQ(rows.global_targets, kBatch * kBlock);
    EXPECT_EQ(task.input().dim(0), rows.mine.size());
    EXPECT_EQ(task.input().dim(1), kBlock);
    const auto ids = task.input().to_ids();
    const auto targets = task.targets().to_ids();
    all.ids.insert(all.ids.end(), ids.begin(), ids.end());
    all.targets.insert(all.targets.end(), targets.begin(), targets.end());
  }
  return all;
}

TEST(TextWindows, TokenIdsAreCheckedAtUpload) {
  const std::vector<std::int32_t> ids = {0, 1, 5, 2};
  expect_input_error([&] { make_resident_tokens("s/train", ids, 5, Target::Cpu); },
                     {"s/train", "token id 5 at position 2", "[0, 5)"});
  EXPECT_EQ(make_resident_tokens("s/train", ids, 6, Target::Cpu).count, 4);
}

TEST(TextWindows, StartsAreAFunctionOfSeedStreamStepAndRowOnly) {
  std::vector<std::int64_t> a, by_step, by_row, by_stream, by_seed;
  for (std::int64_t r = 0; r < 64; ++r) {
    const std::int64_t s = window_start(kSeed, WindowStream::Train, 3, r, kTrainTokens, kBlock);
    ASSERT_GE(s, 0);
    ASSERT_LT(s, kTrainTokens - kBlock);  // leaves block + 1 tokens
    EXPECT_EQ(s, window_start(kSeed, WindowStream::Train, 3, r, kTrainTokens, kBlock));
    a.push_back(s);
    by_step.push_back(window_start(kSeed, WindowStream::Train, 4, r, kTrainTokens, kBlock));
    by_row.push_back(window_start(kSeed, WindowStream::Train, 3, r + 64, kTrainTokens, kBlock));
    by_stream.push_back(window_start(kSeed, WindowStream::Validation, 3, r, kTrainTokens, kBlock));
    by_seed.push_back(window_start(kSeed + 1, WindowStream::Train, 3, r, kTrainTokens, kBlock));
  }
  EXPECT_NE(a, by_step);
  EXPECT_NE(a, by_row);
  EXPECT_NE(a, by_stream);
  EXPECT_NE(a, by_seed);
  // Every start is reachable, the last one included.
  std::set<std::int64_t> seen;
  for (std::int64_t r = 0; r < 200; ++r) {
    seen.insert(window_start(1, WindowStream::Train, 0, r, 8, 5));
  }
  EXPECT_EQ(seen, (std::set<std::int64_t>{0, 1, 2}));
  // window_starts lays batches out batch-major.
  const std::vector<std::int32_t> starts =
      window_starts(kSeed, WindowStream::Train, 3, 2, 64, kTrainTokens, kBlock);
  ASSERT_EQ(starts.size(), 128u);
  for (std::size_t r = 0; r < 64; ++r) {
    EXPECT_EQ(starts[r], a[r]);
    EXPECT_EQ(starts[64 + r], by_step[r]);
  }
  // Pinned: the windows are part of a run's reproducibility across machines and versions.
  EXPECT_EQ(window_starts(1, WindowStream::Train, 0, 1, 4, 1000, 10),
            (std::vector<std::int32_t>{231, 386, 370, 730}));
}

TEST(TextWindows, TheGlobalBatchIsTheSameForOneAndThreeRanks) {
  const ResidentText text = counting_text();
  // Period 1, step 2: global step 6 of the run.
  const Windows one = global_batch_of(text, 1, 2, 1);
  const Windows three = global_batch_of(text, 1, 2, 3);  // rows 2, 2, 3
  EXPECT_EQ(one.ids, three.ids);
  EXPECT_EQ(one.targets, three.targets);
  ASSERT_EQ(one.ids.size(), static_cast<std::size_t>(kBatch * kBlock));
  for (std::int64_t b = 0; b < kBatch; ++b) {
    // Token id = position: a window's ids are its start and the positions after it.
    const std::int64_t start = window_start(kSeed, WindowStream::Train, 6, b, kTrainTokens, kBlock);
    for (std::int64_t t = 0; t < kBlock; ++t) {
      const auto i = static_cast<std::size_t>(b * kBlock + t);
      EXPECT_EQ(one.ids[i], start + t);
      EXPECT_EQ(one.targets[i], one.ids[i] + 1);  // the next token
    }
  }
}

TEST(TextWindows, StepsReadDifferentWindowsAndAFreshTaskContinuesExactly) {
  const ResidentText text = counting_text();
  LanguageModelTask task(text.train, text.validation, options());
  std::vector<std::vector<std::int32_t>> seen;
  for (std::int64_t period = 0; period < 3; ++period) {
    task.begin_period(period, Target::Cpu);
    for (std::int64_t s = 0; s < 4; ++s) {
      task.load(s, 0, 1, nullptr);
      seen.push_back(task.input().to_ids());
    }
  }
  for (std::size_t i = 0; i < seen.size(); ++i) {
    for (std::size_t j = i + 1; j < seen.size(); ++j) EXPECT_NE(seen[i], seen[j]) << i << " " << j;
  }
  // A resumed run builds a new task and starts in the middle of a period.
  LanguageModelTask resumed(text.train, text.validation, options());
  resumed.begin_period(2, Target::Cpu);
  resumed.load(1, 0, 1, nullptr);
  EXPECT_EQ(resumed.input().to_ids(), seen[9]);
}

// A model that records the ids it is given and answers zero logits: loss ln V per token.
template <std::int64_t T, std::int64_t V>
struct RecordingModel {
  static constexpr int arity = 1;
  static constexpr std::int64_t in_dim = T;
  static constexpr std::int64_t out_dim = V;
  explicit RecordingModel(const Init&) {}
  const Tensor& forward(Context& ctx, const Tensor& ids) {
    const std::vector<std::int32_t> v = ids.to_ids();
    seen.insert(seen.end(), v.begin(), v.end());
    y.resize({ids.numel(), V}, ctx.target);
    y.zero();
    return y;
  }
  const Tensor& vjp(Context&, const Tensor&, InputGrad) { return y; }
  template <class Visitor>
  void for_each_param(Visitor&&, std::string_view) {}

  std::vector<std::int32_t> seen;
  Tensor y;
};

TEST(TextWindows, ValidationWindowsAreFixed) {
  const ResidentText text = counting_text();
  LanguageModelTask task(text.train, text.validation, options());
  Context ctx = Context::for_target(Target::Cpu);
  RecordingModel<kBlock, kTrainTokens> model(Init(Target::Cpu, InitSpec{}));

  task.begin_period(0, Target::Cpu);
  const EvalResult first = task.evaluate(model, ctx, nullptr);
  const std::vector<std::int32_t> first_ids = model.seen;
  model.seen.clear();
  task.begin_period(2, Target::Cpu);
  task.load(3, 0, 1, nullptr);
  const EvalResult later = task.evaluate(model, ctx, nullptr);
  EXPECT_EQ(model.seen, first_ids);
  EXPECT_EQ(later.loss, first.loss);
  EXPECT_NEAR(first.loss, std::log(static_cast<double>(kTrainTokens)), 1e-6);
  EXPECT_TRUE(std::isnan(first.accuracy));
  EXPECT_EQ(first.samples, 3 * kBatch * kBlock);  // every target token of the set
  ASSERT_EQ(first_ids.size(), static_cast<std::size_t>(3 * kBatch * kBlock));
  for (std::int64_t e = 0; e < 3; ++e) {
    for (std::int64_t b = 0; b < kBatch; ++b) {
      const std::int64_t start =
          window_start(kSeed, WindowStream::Validation, e, b, kValidationTokens, kBlock);
      EXPECT_EQ(first_ids[static_cast<std::size_t>((e * kBatch + b) * kBlock)], start);
    }
  }
}

TEST(TextWindows, OptionsAndShortSplitsAreErrors) {
  const ResidentText text = counting_text();
  const ResidentTokens short_split =
      counting_tokens("count/validation", kBlock, kTrainTokens, Target::Cpu);
  auto build = [&](const ResidentTokens& validation, const LanguageModelOptions& o) {
    LanguageModelTask task(text.train, validation, o);
  };
  LanguageModelOptions o = options();
  o.steps = 10;
  expect_input_error([&] { build(text.validation, o); },
                     {"--steps 10", "not a multiple of --eval-every 4"});
  o = options();
  o.eval_every = 0;
  expect_input_error([&] { build(text.validation, o); }, {"--eval-every 0"});
  expect_input_error([&] { build(short_split, options()); },
                     {"count/validation", "5 tokens, too few", "--block 5"});
  LanguageModelTask task(text.train, text.validation, options());
  EXPECT_EQ(task.periods(), 3);
  EXPECT_EQ(task.steps_per_period(), 4);
  EXPECT_EQ(task.period_targets(), 4 * kBatch * kBlock);
  EXPECT_EQ(task.train_samples(), kTrainTokens);
  task.begin_period(0, Target::Cpu);
  expect_input_error([&] { task.load(0, 0, 8, nullptr); },
                     {"--batch 7", "smaller than the 8 ranks"});
  // Logits that are not [tokens, V >= vocabulary] are refused before the loss kernel.
  task.load(0, 0, 1, nullptr);
  Context ctx = Context::for_target(Target::Cpu);
  Tensor sum({1}, Target::Cpu, DType::F64);
  Tensor narrow({kBatch * kBlock, kTrainTokens - 1});
  expect_input_error([&] { task.loss(ctx, narrow, 1.0f, sum.as<double>()); },
                     {"output of shape [35, 299]", "V >= 300"});
  Tensor three_d({kBatch, kBlock, kTrainTokens});
  task.loss(ctx, three_d, 1.0f, sum.as<double>());
  EXPECT_EQ(task.loss_grad().shape(), three_d.shape());  // the gradient in the output's shape
}

TEST(TextWindows, CudaBatchesMatchTheCpu) {
  NOEIRA_REQUIRE_GPU();
  std::vector<Windows> got;
  for (Target target : {Target::Cpu, Target::Cuda}) {
    got.push_back(global_batch_of(counting_text(target), 2, 3, 2));
  }
  EXPECT_EQ(got[0].ids, got[1].ids);
  EXPECT_EQ(got[0].targets, got[1].targets);
}

}  // namespace
}  // namespace noeira
