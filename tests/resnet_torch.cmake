# One training step of resnet20 against PyTorch (Debian's python3-torch): the gtest ResNetTorch
# writes weights, buffers, input, logits, loss and gradients (tests/test_resnet_torch.cpp), then
# tests/resnet_torch_check.py recomputes them in torch. Without torch the check skips (77).
include(${CMAKE_CURRENT_LIST_DIR}/torch_check.cmake)
noeira_torch_check(resnet_torch ResNetTorch.WritesTheCase NOEIRA_RESNET_CASES
                   ${CMAKE_CURRENT_BINARY_DIR}/resnet_torch/cases.bin
                   grad/layer2.0.downsample.0.weight
                   "grad/layer2\\.0\\.downsample\\.0\\.weight: mismatch in 1 of 512 elements")
