# BatchNorm against PyTorch (Debian's python3-torch): the gtest BatchNormTorch writes weights,
# inputs, outputs, gradients and running estimates (tests/test_batchnorm_torch.cpp), then
# tests/batchnorm_torch_check.py recomputes them in torch. Without torch the check skips (77).
include(${CMAKE_CURRENT_LIST_DIR}/torch_check.cmake)
noeira_torch_check(batchnorm_torch BatchNormTorch.WritesTheCases NOEIRA_BATCHNORM_CASES
                   ${CMAKE_CURRENT_BINARY_DIR}/batchnorm_torch/cases.bin
                   batchnorm2d/step1/grad/weight
                   "batchnorm2d/step1/grad/weight: mismatch in 1 of 3 elements")
