# The attention leaves against PyTorch (Debian's python3-torch): the gtest AttentionTorch writes
# weights, inputs, outputs and gradients (tests/test_attention_torch.cpp), then
# tests/attention_torch_check.py recomputes them in torch and fails on any mismatch. The fixture
# runs the writer first. Without torch the check skips (77), never passes.
include(${CMAKE_CURRENT_LIST_DIR}/torch_check.cmake)
noeira_torch_check(attention_torch AttentionTorch.WritesTheCases NOEIRA_ATTENTION_CASES
                   ${CMAKE_CURRENT_BINARY_DIR}/attention_torch/cases.bin
                   self_attention_rope_gqa/grad/qkv.weight
                   "self_attention_rope_gqa/grad/qkv\\.weight: mismatch in 1 of 512 elements")
