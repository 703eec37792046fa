// Writes Conv2D's and ConvTranspose2D's weights, inputs, outputs and every gradient to one file,
// which tests/conv_torch_check.py recomputes with torch.nn.functional.conv2d / conv_transpose2d
// in float64 and compares (ctest: tests/conv_torch.cmake).
//
// The file's format: tests/torch_case_file.hpp.
// The path is $NOEIRA_CONV_CASES; without it the test writes a scratch file and removes it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "conv_util.hpp"
#include "leaf_util.hpp"
#include "nn/conv2d.hpp"
#include "nn/conv_transpose2d.hpp"
#include "torch_case_file.hpp"

namespace noeira {
namespace {

using testing::CaseFile;
using testing::image_input;

template <class M>
void write_case(CaseFile& file, const std::string& name, std::int64_t rows, nlohmann::json c,
                std::uint32_t seed) {
  M m(testing::kLeafInit);
  testing::randomize_conv_params(m, seed);
  Context ctx = Context::for_target(Target::Cpu);
  const Tensor x = image_input(rows, M::in_image, seed + 1);
  const Tensor dy = image_input(rows, M::out_image, seed + 2);
  file.add(name + "/x", x);
  file.add(name + "/dy", dy);
  file.add(name + "/y", m.forward(ctx, x));
  file.add(name + "/dx", m.vjp(ctx, dy, InputGrad::Compute));
  file.add_params(name, m);
  c["name"] = name;
  file.add_case(std::move(c));
}

template <ConvSpec S>
void conv_case(CaseFile& file, const std::string& name, std::int64_t rows, std::uint32_t seed) {
  write_case<Conv2D<S>>(file, name, rows,
                        {{"kind", "conv2d"}, {"stride", S.stride}, {"padding", S.padding},
                         {"dilation", S.dilation}, {"groups", S.groups}, {"bias", S.bias}},
                        seed);
}

template <ConvTransposeSpec S>
void transpose_case(CaseFile& file, const std::string& name, std::int64_t rows,
                    std::uint32_t seed) {
  write_case<ConvTranspose2D<S>>(
      file, name, rows,
      {{"kind", "conv_transpose2d"}, {"stride", S.stride}, {"padding", S.padding},
       {"output_padding", S.output_padding}, {"dilation", S.dilation}, {"groups", S.groups},
       {"bias", S.bias}},
      seed);
}

TEST(ConvTorch, WritesTheCases) {
  CaseFile file;
  conv_case<ConvSpec{{3, 9, 7}, 5, 3, 1, 1}>(file, "conv_3x3_pad1", 3, 1);
  conv_case<ConvSpec{{4, 11, 10}, 6, 3, 2, 2, 2, 2}>(file, "conv_stride2_dilation2_groups2", 2, 2);
  conv_case<ConvSpec{{6, 7, 7}, 4, 1, 1, 0, 1, 1, false}>(file, "conv_pointwise_nobias", 3, 3);
  conv_case<ConvSpec{{3, 8, 9}, 6, 4, 3, 1, 1, 3}>(file, "conv_even_kernel_stride3_groups3", 1,
                                                   4);
  conv_case<ConvSpec{{4, 6, 6}, 4, 3, 1, 1, 1, 4}>(file, "conv_depthwise", 2, 5);
  // More images than the weight gradient's blocks: several images summed in each block.
  conv_case<ConvSpec{{3, 6, 5}, 4, 3, 1, 1}>(file, "conv_batch37", 37, 7);
  // A resnet-sized layer: 16 channels of 32x32, as the first stage of resnet20.
  conv_case<ConvSpec{{16, 32, 32}, 16, 3, 1, 1, 1, 1, false}>(file, "conv_resnet_stage1", 2, 6);
  transpose_case<ConvTransposeSpec{{4, 5, 6}, 3, 3, 2, 1, 1}>(file, "transpose_upsample2", 3, 11);
  transpose_case<ConvTransposeSpec{{4, 4, 3}, 6, 3, 1, 2, 0, 2, 2}>(
      file, "transpose_dilation2_groups2", 2, 12);
  transpose_case<ConvTransposeSpec{{3, 4, 4}, 3, 2, 2, 0, 0, 1, 3, false}>(
      file, "transpose_kernel2_groups3_nobias", 2, 13);
  transpose_case<ConvTransposeSpec{{5, 3, 4}, 2, 1}>(file, "transpose_pointwise", 3, 14);
  transpose_case<ConvTransposeSpec{{3, 3, 4}, 2, 3, 2, 1, 1}>(file, "transpose_batch37", 37, 15);
  file.write_where_asked("NOEIRA_CONV_CASES", "noeira_conv_cases");
}

}  // namespace
}  // namespace noeira
