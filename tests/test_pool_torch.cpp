// Writes inputs, outputs and input gradients of the image leaves (max, average and global
// average pooling, nearest upsampling) to one file, which tests/pool_torch_check.py recomputes
// with torch.nn.functional in float64 and compares (ctest: tests/pool_torch.cmake).
//
// The file's format: tests/torch_case_file.hpp.
// The path is $NOEIRA_POOL_CASES; without it the test writes a scratch file and removes it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "leaf_util.hpp"
#include "nn/pool2d.hpp"
#include "nn/upsample.hpp"
#include "pool_util.hpp"
#include "torch_case_file.hpp"

namespace noeira {
namespace {

using testing::CaseFile;

// How a case hands its input to the leaf: as images [rows, C, H, W] or as rows [rows, C·H·W].
enum class Layout : std::uint8_t { Images, Rows };

// Runs M forward and back on `rows` images and records x, dy, y and dx under `name`. Max
// pooling reads values without ties, whose gradient PyTorch and noeira could route differently.
template <class M>
void image_case(CaseFile& file, const std::string& name, nlohmann::json c, std::int64_t rows,
                Layout layout, std::uint32_t seed) {
  M m(testing::kLeafInit);
  Context ctx = Context::for_target(Target::Cpu);
  const bool max_pool = c["kind"] == "max_pool";
  Tensor x = max_pool ? testing::distinct_images(rows, M::in_image, seed)
                      : testing::random_images(rows, M::in_image, seed, Target::Cpu, -2.0f, 2.0f);
  if (layout == Layout::Rows) x = x.view({rows, M::in_dim});
  const Tensor& y = m.forward(ctx, x);
  const Tensor dy = Tensor::from_host(
      y.shape(), testing::random_values(static_cast<std::size_t>(y.numel()), seed + 1));
  file.add(name + "/x", x);
  file.add(name + "/dy", dy);
  file.add(name + "/y", y);
  file.add(name + "/dx", m.vjp(ctx, dy, InputGrad::Compute));
  c["name"] = name;
  c["image"] = {M::in_image.channels, M::in_image.height, M::in_image.width};
  file.add_case(std::move(c));
}

template <PoolSpec S>
nlohmann::json pool_json(const char* kind) {
  return {{"kind", kind}, {"kernel", S.kernel}, {"stride", S.stride}, {"padding", S.padding}};
}

TEST(PoolTorch, WritesTheCases) {
  using testing::kDense;
  using testing::kEvenPadded;
  using testing::kOverlapping;
  using testing::kSparse;
  using testing::kTiled;
  CaseFile file;
  image_case<MaxPool2D<kOverlapping>>(file, "max_pool_overlapping",
                                      pool_json<kOverlapping>("max_pool"), 3, Layout::Images, 1);
  image_case<MaxPool2D<kTiled>>(file, "max_pool_tiled_rows", pool_json<kTiled>("max_pool"), 2,
                                Layout::Rows, 2);
  image_case<MaxPool2D<kDense>>(file, "max_pool_dense", pool_json<kDense>("max_pool"), 2,
                                Layout::Images, 3);
  image_case<MaxPool2D<kSparse>>(file, "max_pool_sparse", pool_json<kSparse>("max_pool"), 1,
                                 Layout::Images, 4);
  image_case<AvgPool2D<kOverlapping>>(file, "avg_pool_overlapping",
                                      pool_json<kOverlapping>("avg_pool"), 3, Layout::Images, 5);
  image_case<AvgPool2D<kEvenPadded>>(file, "avg_pool_even_padded_rows",
                                     pool_json<kEvenPadded>("avg_pool"), 2, Layout::Rows, 6);
  image_case<AvgPool2D<kSparse>>(file, "avg_pool_sparse", pool_json<kSparse>("avg_pool"), 2,
                                 Layout::Images, 7);
  image_case<GlobalAvgPool2D<ImageShape{3, 5, 7}>>(file, "global_avg_pool",
                                                   {{"kind", "global_avg_pool"}}, 3,
                                                   Layout::Images, 8);
  image_case<UpsampleNearest2D<ImageShape{2, 3, 5}, 2>>(
      file, "upsample_nearest_2", {{"kind", "upsample_nearest"}, {"scale", 2}}, 2,
      Layout::Images, 9);
  image_case<UpsampleNearest2D<ImageShape{1, 4, 3}, 3>>(
      file, "upsample_nearest_3_rows", {{"kind", "upsample_nearest"}, {"scale", 3}}, 3,
      Layout::Rows, 10);
  file.write_where_asked("NOEIRA_POOL_CASES", "noeira_pool_cases");
}

}  // namespace
}  // namespace noeira
