#pragma once
// The convolution's columns: one image [C, H, W] unrolled into the matrix [C·k·k, Ho·Wo] whose
// row (c, i, j) holds, for every output pixel, the input pixel that kernel tap (i, j) of channel
// c reads (0 in the padding). Then the convolution is one GEMM per group, weight [Co/G, C/G·k·k]
// times that group's block of rows. col2im is im2col's transpose: it adds every column entry back
// onto the input pixel it came from, which is how the input gradient is made.
#include <cstdint>

#include "kernels/kernel_table.hpp"

namespace noeira::cpu {

// A 1x1 convolution with stride 1 and no padding reads every input pixel once, in place: its
// columns are the image itself, and no im2col is needed.
constexpr bool conv_is_pointwise(const ConvGeometry& g) {
  return g.kernel == 1 && g.stride == 1 && g.padding == 0;
}

// cols [C·k·k, Ho·Wo] from image [C, H, W] (geometry's input channels and sizes).
void im2col(float* cols, const float* image, const ConvGeometry& g);

// image [C, H, W] = the sum of every cols entry onto the pixel im2col read it from (overwrites the
// image; pixels no window reads are 0). One image, in a fixed order: deterministic.
void col2im(float* image, const float* cols, const ConvGeometry& g);

}  // namespace noeira::cpu
