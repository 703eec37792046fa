# noeira's ViT against PyTorch (Debian's python3-torch), as tests/gpt_torch.cmake checks the GPT:
# the gtest VitTorch writes a small ViT's weights (model.h5) and one step's loss, logits and
# gradients (tests/test_vit_torch.cpp), then tests/vit_torch_check.py loads the weights with h5py
# into tests/torch_vit.py's model, recomputes in float64 and fails on any mismatch. The fixture
# runs the writer first. Without torch or h5py the check skips (77), never passes.
set(noeira_vit_torch_dir ${CMAKE_CURRENT_BINARY_DIR}/vit_torch)
find_program(NOEIRA_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(NOEIRA_PYTHON3 python3)
add_test(NAME vit_torch_write
         COMMAND ${CMAKE_COMMAND} -E env NOEIRA_VIT_TORCH_DIR=${noeira_vit_torch_dir}
                 OMP_NUM_THREADS=2
                 $<TARGET_FILE:noeira_tests> --gtest_filter=VitTorch.WritesTheCase)
set_tests_properties(vit_torch_write PROPERTIES FIXTURES_SETUP vit_torch TIMEOUT 60)
if(NOEIRA_PYTHON3)
  add_test(NAME vit_torch_check
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/vit_torch_check.py
                   ${noeira_vit_torch_dir})
  set_tests_properties(vit_torch_check PROPERTIES
                       FIXTURES_REQUIRED vit_torch SKIP_RETURN_CODE 77 TIMEOUT 120)
  # The check can fail: one element of one noeira gradient moved by 1e-4 relative must be named.
  add_test(NAME vit_torch_check_catches_mismatch
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/vit_torch_check.py
                   ${noeira_vit_torch_dir} --perturb grad/patch_embed.proj.weight)
  set_tests_properties(vit_torch_check_catches_mismatch PROPERTIES
                       FIXTURES_REQUIRED vit_torch SKIP_RETURN_CODE 77 TIMEOUT 120
                       PASS_REGULAR_EXPRESSION
                       "grad/patch_embed\\.proj\\.weight: mismatch in 1 of 512 elements"
                       FAIL_REGULAR_EXPRESSION "match torch$")
endif()
