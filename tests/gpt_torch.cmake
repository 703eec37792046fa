# noeira's GPT against PyTorch: gpt-tiny's step (tests/test_gpt_torch.cpp) recomputed by
# tests/gpt_torch_check.py in tests/torch_gpt.py's nanoGPT-style model.
include(${CMAKE_CURRENT_LIST_DIR}/torch_check.cmake)
noeira_torch_check(gpt_torch GptTorch.WritesTheCase NOEIRA_GPT_TORCH_DIR
                   ${CMAKE_CURRENT_BINARY_DIR}/gpt_torch grad/h.1.attn.qkv.weight
                   "grad/h\\.1\\.attn\\.qkv\\.weight: mismatch in 1 of 3072 elements")
# The same step with --precision bf16's products, against the reference with every product's
# operands rounded to bfloat16.
noeira_torch_check(gpt_bf16_torch GptTorch.WritesTheBf16Case NOEIRA_GPT_TORCH_BF16_DIR
                   ${CMAKE_CURRENT_BINARY_DIR}/gpt_bf16_torch grad/h.1.attn.qkv.weight
                   "grad/h\\.1\\.attn\\.qkv\\.weight: mismatch in 1 of 3072 elements"
                   gpt_torch)
