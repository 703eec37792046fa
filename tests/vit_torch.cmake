# noeira's ViT against PyTorch: a small ViT's step (tests/test_vit_torch.cpp) recomputed by
# tests/vit_torch_check.py in tests/torch_vit.py's timm-style model.
include(${CMAKE_CURRENT_LIST_DIR}/torch_check.cmake)
noeira_torch_check(vit_torch VitTorch.WritesTheCase NOEIRA_VIT_TORCH_DIR
                   ${CMAKE_CURRENT_BINARY_DIR}/vit_torch grad/patch_embed.proj.weight
                   "grad/patch_embed\\.proj\\.weight: mismatch in 1 of 512 elements")
