# Conv2D and ConvTranspose2D against PyTorch (Debian's python3-torch): the gtest ConvTorch writes
# weights, inputs, outputs and gradients (tests/test_conv_torch.cpp), then
# tests/conv_torch_check.py recomputes them with torch's conv2d / conv_transpose2d and fails on
# any mismatch. The fixture runs the writer first. Without torch the check skips (77), never
# passes.
include(${CMAKE_CURRENT_LIST_DIR}/torch_check.cmake)
noeira_torch_check(conv_torch ConvTorch.WritesTheCases NOEIRA_CONV_CASES
                   ${CMAKE_CURRENT_BINARY_DIR}/conv_torch/cases.bin
                   conv_stride2_dilation2_groups2/grad/weight
                   "conv_stride2_dilation2_groups2/grad/weight: mismatch in 1 of 108 elements")
