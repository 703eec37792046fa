# The activation leaves against PyTorch: inputs, outputs and input gradients of every activation
# (tests/test_activation_torch.cpp) recomputed by tests/activation_torch_check.py with
# torch.nn.functional.
include(${CMAKE_CURRENT_LIST_DIR}/torch_check.cmake)
noeira_torch_check(activation_torch ActivationTorch.WritesTheCases NOEIRA_ACTIVATION_CASES
                   ${CMAKE_CURRENT_BINARY_DIR}/activation_torch/cases.bin mish/dx
                   "mish/dx: mismatch in 1 of 60 elements")
