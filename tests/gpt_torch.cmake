# noeira's GPT against PyTorch (Debian's python3-torch), as llm.c checks itself against nanoGPT:
# the gtest GptTorch writes gpt-tiny's weights (model.h5) and one step's loss, logits and
# gradients (tests/test_gpt_torch.cpp), then tests/gpt_torch_check.py loads the weights with h5py
# into tests/torch_gpt.py's model, recomputes in float64 and fails on any mismatch. The fixture
# runs the writer first. Without torch or h5py the check skips (77), never passes.
set(noeira_gpt_torch_dir ${CMAKE_CURRENT_BINARY_DIR}/gpt_torch)
find_program(NOEIRA_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(NOEIRA_PYTHON3 python3)
add_test(NAME gpt_torch_write
         COMMAND ${CMAKE_COMMAND} -E env NOEIRA_GPT_TORCH_DIR=${noeira_gpt_torch_dir}
                 OMP_NUM_THREADS=2
                 $<TARGET_FILE:noeira_tests> --gtest_filter=GptTorch.WritesTheCase)
set_tests_properties(gpt_torch_write PROPERTIES FIXTURES_SETUP gpt_torch TIMEOUT 60)
if(NOEIRA_PYTHON3)
  add_test(NAME gpt_torch_check
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/gpt_torch_check.py
                   ${noeira_gpt_torch_dir})
  set_tests_properties(gpt_torch_check PROPERTIES
                       FIXTURES_REQUIRED gpt_torch SKIP_RETURN_CODE 77 TIMEOUT 120)
  # The check can fail: one element of one noeira gradient moved by 1e-4 relative must be named.
  add_test(NAME gpt_torch_check_catches_mismatch
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/gpt_torch_check.py
                   ${noeira_gpt_torch_dir} --perturb grad/h.1.attn.qkv.weight)
  set_tests_properties(gpt_torch_check_catches_mismatch PROPERTIES
                       FIXTURES_REQUIRED gpt_torch SKIP_RETURN_CODE 77 TIMEOUT 120
                       PASS_REGULAR_EXPRESSION
                       "grad/h\\.1\\.attn\\.qkv\\.weight: mismatch in 1 of 3072 elements"
                       FAIL_REGULAR_EXPRESSION "match torch$")
endif()
