# The image leaves against PyTorch: inputs, outputs and input gradients of the pooling and
# upsampling leaves (tests/test_pool_torch.cpp) recomputed by tests/pool_torch_check.py with
# torch.nn.functional.
include(${CMAKE_CURRENT_LIST_DIR}/torch_check.cmake)
noeira_torch_check(pool_torch PoolTorch.WritesTheCases NOEIRA_POOL_CASES
                   ${CMAKE_CURRENT_BINARY_DIR}/pool_torch/cases.bin max_pool_overlapping/dx
                   "max_pool_overlapping/dx: mismatch in 1 of 378 elements")
