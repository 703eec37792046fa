# The two-hot, Gaussian NLL and sequence cross-entropy losses against PyTorch: inputs, mean losses
# and gradients (tests/test_losses_torch.cpp) recomputed by tests/losses_torch_check.py.
include(${CMAKE_CURRENT_LIST_DIR}/torch_check.cmake)
noeira_torch_check(losses_torch LossesTorch.WritesTheCases NOEIRA_LOSSES_CASES
                   ${CMAKE_CURRENT_BINARY_DIR}/losses_torch/cases.bin two_hot/grad
                   "two_hot/grad: mismatch in 1 of 110 elements")
