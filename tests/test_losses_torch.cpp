// Writes the inputs, losses and gradients of the two-hot, Gaussian NLL and sequence
// cross-entropy losses to one file, which tests/losses_torch_check.py recomputes with PyTorch in
// float64 and compares (ctest: tests/losses_torch.cmake). The file's format:
// tests/torch_case_file.hpp; its path is $NOEIRA_LOSSES_CASES (without it the test writes a
// scratch file and removes it). Integer labels travel as float32, exact for these values.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "gradcheck.hpp"
#include "loss/gaussian_nll.hpp"
#include "loss/sequence_cross_entropy.hpp"
#include "loss/two_hot.hpp"
#include "torch_case_file.hpp"

namespace noeira {
namespace {

using testing::random_values;

// Targets on a bin, between bins, at both ends and beyond them.
void two_hot_case(testing::CaseFile& file) {
  Context ctx = Context::for_target(Target::Cpu);
  const std::int64_t rows = 10, bins = 11;
  const float low = -5.0f, high = 5.0f;
  const Tensor logits =
      Tensor::from_host({rows, bins}, random_values(rows * bins, 51, -4.0f, 4.0f));
  const std::vector<float> y = {0.0f, 1.0f, 2.5f, -3.7f, 4.99f, 5.0f, -5.0f, 12.0f, -40.0f, 0.3f};
  const Tensor target = Tensor::from_host({rows}, y);
  TwoHotLoss loss(low, high);
  const double sum = loss.forward_backward(ctx, logits, target, 1.0f / rows);
  file.add("two_hot/logits", logits);
  file.add("two_hot/target", target);
  file.add("two_hot/grad", loss.grad());
  file.add_case({{"name", "two_hot"}, {"low", low}, {"high", high}, {"loss", sum / rows}});
}

// Some variances below eps (one of them zero), their means near the target so that the loss is
// not all e²/eps.
void gaussian_nll_case(testing::CaseFile& file) {
  Context ctx = Context::for_target(Target::Cpu);
  const std::int64_t rows = 6, d = 4;
  std::vector<float> p = random_values(rows * 2 * d, 52, -2.0f, 2.0f);
  std::vector<float> t = random_values(rows * d, 53, -2.0f, 2.0f);
  const std::vector<float> v = random_values(rows * d, 54, 0.05f, 3.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < d; ++c) {
      p[static_cast<std::size_t>(r * 2 * d + d + c)] = v[static_cast<std::size_t>(r * d + c)];
    }
  }
  const std::int64_t floored[][2] = {{0, 1}, {2, 0}, {5, 3}};
  const float tiny[] = {1e-8f, 0.0f, 5e-7f};
  for (int i = 0; i < 3; ++i) {
    const std::int64_t r = floored[i][0], c = floored[i][1];
    p[static_cast<std::size_t>(r * 2 * d + d + c)] = tiny[i];
    t[static_cast<std::size_t>(r * d + c)] = p[static_cast<std::size_t>(r * 2 * d + c)] + 2e-4f;
  }
  const Tensor pred = Tensor::from_host({rows, 2 * d}, p);
  const Tensor target = Tensor::from_host({rows, d}, t);
  GaussianNLLLoss loss(1e-6f);
  const double sum = loss.forward_backward(ctx, pred, target, 1.0f / rows);
  file.add("gaussian_nll/pred", pred);
  file.add("gaussian_nll/target", target);
  file.add("gaussian_nll/grad", loss.grad());
  file.add_case({{"name", "gaussian_nll"}, {"eps", 1e-6}, {"loss", sum / rows}});
}

// A [B, T, V] batch with padding (-100) at the ends of the sequences.
void sequence_case(testing::CaseFile& file) {
  Context ctx = Context::for_target(Target::Cpu);
  const std::int64_t batch = 3, steps = 5, vocab = 17;
  const Tensor logits = Tensor::from_host(
      {batch, steps, vocab}, random_values(batch * steps * vocab, 55, -5.0f, 5.0f));
  std::vector<std::int32_t> ids;
  std::vector<float> ids_as_floats;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t s = 0; s < steps; ++s) {
      const std::int32_t id =
          s >= steps - b ? -100 : static_cast<std::int32_t>((b * 7 + s * 3) % vocab);
      ids.push_back(id);
      ids_as_floats.push_back(static_cast<float>(id));
    }
  }
  SequenceCrossEntropyLoss loss;
  const double mean =
      loss.forward_backward(ctx, logits, Tensor::from_host_ids({batch, steps}, ids));
  file.add("sequence/logits", logits);
  file.add("sequence/labels", Tensor::from_host({batch, steps}, ids_as_floats));
  file.add("sequence/grad", loss.grad());
  file.add_case({{"name", "sequence"}, {"ignore_index", -100}, {"loss", mean}});
}

TEST(LossesTorch, WritesTheCases) {
  testing::CaseFile file;
  two_hot_case(file);
  gaussian_nll_case(file);
  sequence_case(file);
  file.write_where_asked("NOEIRA_LOSSES_CASES", "noeira_losses_cases");
}

}  // namespace
}  // namespace noeira
