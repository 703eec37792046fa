// The ViT's leaves (nn/patch_embed.hpp, class_token.hpp, position_embedding.hpp): the patch
// embedding against the strided convolution written out, the tokens' closed forms, and finite
// differences for every parameter and input at several batch sizes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "leaf_util.hpp"
#include "nn/class_token.hpp"
#include "nn/patch_embed.hpp"
#include "nn/position_embedding.hpp"

namespace noeira {
namespace {

using testing::kLeafInit;
using testing::random_values;

constexpr ImageShape kImage{2, 6, 9};  // two channels, 2 x 3 patches of 3 x 3
using Patches = PatchEmbed<kImage, 3, 5>;

std::vector<float> param_value(auto& m, const std::string& wanted) {
  std::vector<float> v;
  for_each_param(m, [&](const std::string& name, Param& p) {
    if (name == wanted) v = p.val.to_vector();
  });
  return v;
}

Tensor images(std::int64_t rows, ImageShape s, std::uint32_t seed) {
  return Tensor::from_host(image_batch_shape(rows, s),
                           random_values(static_cast<std::size_t>(rows * s.numel()), seed));
}

TEST(PatchEmbed, IsTheStridedConvolutionWrittenOut) {
  Patches embed(kLeafInit);
  testing::randomize_params(embed, 3);
  Context ctx = Context::for_target(Target::Cpu);
  constexpr std::int64_t rows = 3, p = 3, width = 5;
  const Tensor x = images(rows, kImage, 4);
  const Tensor& y = embed.forward(ctx, x);
  ASSERT_EQ(y.shape(), (Shape{rows, Patches::patches, width}));
  const std::vector<float> w = param_value(embed, "proj.weight");
  const std::vector<float> b = param_value(embed, "proj.bias");
  const std::vector<float> in = x.to_vector(), out = y.to_vector();
  // Conv2d(C, width, kernel p, stride p), then [rows, width, H/p · W/p] transposed to tokens.
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t py = 0; py < kImage.height / p; ++py) {
      for (std::int64_t px = 0; px < kImage.width / p; ++px) {
        for (std::int64_t o = 0; o < width; ++o) {
          double acc = b[static_cast<std::size_t>(o)];
          for (std::int64_t c = 0; c < kImage.channels; ++c) {
            for (std::int64_t ky = 0; ky < p; ++ky) {
              for (std::int64_t kx = 0; kx < p; ++kx) {
                const std::int64_t pixel =
                    ((r * kImage.channels + c) * kImage.height + py * p + ky) * kImage.width +
                    px * p + kx;
                const std::int64_t weight = ((o * kImage.channels + c) * p + ky) * p + kx;
                acc += static_cast<double>(w[static_cast<std::size_t>(weight)]) *
                       in[static_cast<std::size_t>(pixel)];
              }
            }
          }
          const std::int64_t token = py * (kImage.width / p) + px;
          EXPECT_NEAR(out[static_cast<std::size_t>((r * Patches::patches + token) * width + o)],
                      acc, 1e-5)
              << "image " << r << ", patch " << token << ", channel " << o;
        }
      }
    }
  }
}

TEST(PatchEmbed, MatchesFiniteDifferencesAndSmallerBatchesReuseTheIndex) {
  Patches embed(kLeafInit);
  testing::gradcheck(embed, images(5, kImage, 5));
  testing::gradcheck(embed, images(1, kImage, 6));  // a prefix of the index for five
  testing::gradcheck(embed, images(3, kImage, 7).view({3, kImage.numel()}));
}

TEST(PatchEmbed, NamesItsParametersAsTimm) {
  Patches embed(kLeafInit);
  std::vector<std::pair<std::string, Shape>> seen;
  for_each_param(embed, [&](const std::string& n, Param& p) { seen.emplace_back(n, p.shape()); });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::pair<std::string, Shape>{"proj.weight", {5, 2, 3, 3}}));
  EXPECT_EQ(seen[1], (std::pair<std::string, Shape>{"proj.bias", {5}}));
}

TEST(ClassToken, PrependsTheTokenAndMatchesFiniteDifferences) {
  ClassToken<3> cls(kLeafInit);
  testing::randomize_params(cls, 8);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = Tensor::from_host({2, 2, 3}, random_values(12, 9));
  const std::vector<float> y = cls.forward(ctx, x).to_vector();
  const std::vector<float> token = param_value(cls, "cls_token");
  const std::vector<float> in = x.to_vector();
  ASSERT_EQ(y.size(), 18u);
  for (std::size_t b = 0; b < 2; ++b) {
    for (std::size_t c = 0; c < 3; ++c) {
      EXPECT_EQ(y[b * 9 + c], token[c]);
      EXPECT_EQ(y[b * 9 + 3 + c], in[b * 6 + c]);
      EXPECT_EQ(y[b * 9 + 6 + c], in[b * 6 + 3 + c]);
    }
  }
  testing::gradcheck(cls, Tensor::from_host({1, 4, 3}, random_values(12, 10)));
  testing::gradcheck(cls, Tensor::from_host({5, 2, 3}, random_values(30, 11)));
}

TEST(ClassToken, AccumulatesItsGradientWhenAsked) {
  ClassToken<4> cls(kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = Tensor::from_host({3, 2, 4}, random_values(24, 12));
  const Tensor dy = Tensor::from_host({3, 3, 4}, random_values(36, 13));
  cls.forward(ctx, x);
  cls.vjp(ctx, dy, InputGrad::Skip);
  const std::vector<float> once = testing::param_grad(cls, "cls_token");
  ctx.grad_mode = GradMode::Accumulate;
  cls.vjp(ctx, dy, InputGrad::Skip);
  const std::vector<float> twice = testing::param_grad(cls, "cls_token");
  for (std::size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(twice[i], 2 * once[i]);
}

TEST(ClassTokenRow, TakesTokenZeroAndMatchesFiniteDifferences) {
  ClassTokenRow<3> row(kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = Tensor::from_host({2, 3, 3}, random_values(18, 14));
  const std::vector<float> in = x.to_vector();
  EXPECT_EQ(row.forward(ctx, x).to_vector(),
            (std::vector<float>{in[0], in[1], in[2], in[9], in[10], in[11]}));
  testing::gradcheck(row, Tensor::from_host({3, 4, 3}, random_values(36, 15)));
}

TEST(PositionEmbedding, AddsTheTableToEverySequenceAndMatchesFiniteDifferences) {
  PositionEmbedding<3, 2> pos(kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = Tensor::from_host({2, 3, 2}, random_values(12, 16));
  const std::vector<float> y = pos.forward(ctx, x).to_vector();
  const std::vector<float> table = param_value(pos, "pos_embed");
  const std::vector<float> in = x.to_vector();
  for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(y[i], in[i] + table[i % 6]);
  testing::gradcheck(pos, Tensor::from_host({1, 3, 2}, random_values(6, 17)));
  testing::gradcheck(pos, Tensor::from_host({7, 3, 2}, random_values(42, 18)));
  EXPECT_THROW(pos.forward(ctx, Tensor::from_host({1, 2, 2}, random_values(4, 19))), InputError);
}

}  // namespace
}  // namespace noeira
