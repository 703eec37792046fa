# The recurrent layers against PyTorch: two-layer LSTM and GRU stacks' outputs and every gradient
# (tests/test_recurrent_torch.cpp) recomputed by tests/recurrent_torch_check.py with
# torch.nn.LSTM and torch.nn.GRU on the same weights.
include(${CMAKE_CURRENT_LIST_DIR}/torch_check.cmake)
noeira_torch_check(recurrent_torch RecurrentTorch.WritesTheCases NOEIRA_RECURRENT_CASES
                   ${CMAKE_CURRENT_BINARY_DIR}/recurrent_torch/cases.bin gru/grad/1.weight_hh
                   "gru/grad/1.weight_hh: mismatch in 1 of 48 elements")
