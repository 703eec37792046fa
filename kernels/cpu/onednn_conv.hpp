#pragma once
// oneDNN's convolution primitives over slices of a convolution: some of its images, and for the
// weight gradient some of its output channels. Each is built on the calling thread for one thread
// (kernels/cpu/onednn.hpp), kept per thread and slice, and run on the caller's plain fp32 arrays:
// NCHW activations and PyTorch's weight layout go through reorders to the layouts the primitive
// chose (oneDNN's blocked formats; bfloat16 operands under Precision::Bf16) and back.
#include <cstdint>

#include "kernels/kernel_table.hpp"

namespace noeira::cpu {

// A slice: `images` images of the geometry (the pointers below are the slice's first image's);
// output channels [first_out, first_out + outs) of each (all of them, but for a weight gradient
// cut by rows, which needs groups = 1). outs = 0 means all.
struct ConvSlice {
  std::int64_t images = 0;
  std::int64_t first_out = 0, outs = 0;
};

// Under Precision::Bf16 the operands are rounded to bfloat16 (round to nearest even); products
// accumulate in fp32 and results are fp32, overwritten. Each throws noeira::Error naming the pass
// and the geometry when oneDNN refuses it.

// y = conv(x; w) + b[Co] (b may be null).
void onednn_conv_forward(Precision precision, const ConvGeometry& g, const ConvSlice& slice,
                         float* y, const float* x, const float* w, const float* b);
// dx = convᵀ(dy; w).
void onednn_conv_backward_data(Precision precision, const ConvGeometry& g,
                               const ConvSlice& slice, float* dx, const float* dy,
                               const float* w);
// dw rows [first_out, first_out + outs) (dw points at the weight's first row) = the weight
// gradient over the slice's images.
void onednn_conv_backward_filter(Precision precision, const ConvGeometry& g,
                                 const ConvSlice& slice, float* dw, const float* dy,
                                 const float* x);

}  // namespace noeira::cpu
