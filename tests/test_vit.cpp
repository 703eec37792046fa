// The ViT (nn/vit.hpp): timm's names and one unit per part, finite differences for every
// parameter and the image of a small ViT, attention that is not causal, and the same results on
// the GPU as on the CPU (skipped without one). Its leaves: test_vit_leaves.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention_util.hpp"
#include "cuda_compare.hpp"
#include "distributed/units.hpp"
#include "gpu_skip.hpp"
#include "leaf_util.hpp"
#include "nn/vit.hpp"

namespace noeira {
namespace {

using testing::kLeafInit;
using testing::random_values;

using Small = Vit<VitShape{ImageShape{2, 6, 4}, 2, 2, 2, 8, 3}>;  // 6 patches, 7 tokens

Tensor images(std::int64_t rows, ImageShape s, std::uint32_t seed) {
  return Tensor::from_host(image_batch_shape(rows, s),
                           random_values(static_cast<std::size_t>(rows * s.numel()), seed));
}

TEST(Vit, WalkHasTimmNamesAndOneUnitPerPart) {
  Small model(kLeafInit);
  std::vector<std::string> names;
  std::vector<Decay> decay;
  for_each_param(model, [&](const std::string& n, Param& p) {
    names.push_back(n);
    decay.push_back(p.decay);
  });
  ASSERT_EQ(names.size(), 4u + 2u * 12u + 4u);
  EXPECT_EQ(names[0], "patch_embed.proj.weight");
  EXPECT_EQ(names[2], "cls_token");
  EXPECT_EQ(names[3], "pos_embed");
  EXPECT_EQ(names[4], "blocks.0.ln_1.weight");
  EXPECT_EQ(names[6], "blocks.0.attn.qkv.weight");
  EXPECT_EQ(names[27], "blocks.1.mlp.1.bias");
  EXPECT_EQ(names[28], "norm.weight");
  EXPECT_EQ(names.back(), "head.bias");
  EXPECT_EQ(decay[0], Decay::Apply);
  EXPECT_EQ(decay[2], Decay::Skip);
  EXPECT_EQ(decay[3], Decay::Skip);
  const dist::WalkUnits walk = dist::walk_units(model);
  EXPECT_TRUE(walk.marked);
  EXPECT_EQ(walk.unit_params.size(), 4u) << "embeddings, two blocks, the head";
}

TEST(Vit, EveryParameterAndTheImageMatchFiniteDifferences) {
  Small model(kLeafInit);
  // Values of order one, as in Gpt's check: N(0, 0.02) tables put the LayerNorms where they
  // curve sharply for a sensible eps.
  testing::randomize_weights(model, 200, 0.6f);
  testing::GradCheckOptions o;
  o.max_checked_per_tensor = 8;
  testing::gradcheck(model, images(1, Small::in_image, 20), o);
  testing::gradcheck(model, images(3, Small::in_image, 21), o);
}

TEST(Vit, TheClassTokenSeesEveryPatch) {
  // Causal attention would leave token 0 (the class token, the only one the head reads) blind
  // to the patches: the logits would not depend on the image at all.
  Small model(kLeafInit);
  testing::randomize_weights(model, 300, 0.6f);
  Context ctx = Context::for_target(Target::Cpu);
  Tensor x = images(1, Small::in_image, 22);
  const std::vector<float> before = model.forward(ctx, x).to_vector();
  std::vector<float> pixels = x.to_vector();
  pixels.back() += 0.5f;  // the last pixel of the last patch
  x.copy_from(pixels);
  const std::vector<float> after = model.forward(ctx, x).to_vector();
  double moved = 0;
  for (std::size_t i = 0; i < before.size(); ++i) moved += std::fabs(after[i] - before[i]);
  EXPECT_GT(moved, 1e-4);
}

TEST(CudaModule, VitMatchesTheCpu) {
  NOEIRA_REQUIRE_GPU();
  testing::expect_same_on_both(
      [](Target t) {
        Small model(Init(t, InitSpec{InitKind::Normal, 0.0f, 0.3f, 42}));
        Context ctx = Context::for_target(t);
        const Tensor x = testing::random_on(t, image_batch_shape(5, Small::in_image), 8);
        const std::vector<float> y = model.forward(ctx, x).to_vector();
        const Tensor dy = testing::random_on(t, {5, Small::out_dim}, 9);
        const std::vector<float> dx = model.vjp(ctx, dy, InputGrad::Compute).to_vector();
        testing::Outputs out{{"logits", y}, {"dx", dx}};
        for_each_param(model, [&](const std::string& name, Param& p) {
          out.emplace_back(name, p.grd.to_vector());
        });
        return out;
      },
      testing::kGeluEpilogue);  // its MLPs' GELU
}

}  // namespace
}  // namespace noeira
