# The attention leaves against PyTorch (Debian's python3-torch): the gtest AttentionTorch writes
# weights, inputs, outputs and gradients (tests/test_attention_torch.cpp), then
# tests/attention_torch_check.py recomputes them in torch and fails on any mismatch. The fixture
# runs the writer first. Without torch the check skips (77), never passes.
set(noeira_attention_cases ${CMAKE_CURRENT_BINARY_DIR}/attention_torch/cases.bin)
find_program(NOEIRA_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(NOEIRA_PYTHON3 python3)
add_test(NAME attention_torch_write
         COMMAND ${CMAKE_COMMAND} -E env NOEIRA_ATTENTION_CASES=${noeira_attention_cases}
                 $<TARGET_FILE:noeira_tests> --gtest_filter=AttentionTorch.WritesTheCases)
set_tests_properties(attention_torch_write PROPERTIES FIXTURES_SETUP attention_torch TIMEOUT 60)
# ctest does not create the folder the writer writes into.
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/attention_torch)
if(NOEIRA_PYTHON3)
  add_test(NAME attention_torch_check
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/attention_torch_check.py
                   ${noeira_attention_cases})
  set_tests_properties(attention_torch_check PROPERTIES
                       FIXTURES_REQUIRED attention_torch SKIP_RETURN_CODE 77 TIMEOUT 120)
  # The check can fail: one element of one noeira gradient moved by 1e-4 relative must be named.
  add_test(NAME attention_torch_check_catches_mismatch
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/attention_torch_check.py
                   ${noeira_attention_cases} --perturb self_attention_rope_gqa/grad/qkv.weight)
  set_tests_properties(attention_torch_check_catches_mismatch PROPERTIES
                       FIXTURES_REQUIRED attention_torch SKIP_RETURN_CODE 77 TIMEOUT 120
                       PASS_REGULAR_EXPRESSION
                       "self_attention_rope_gqa/grad/qkv\\.weight: mismatch in 1 of 512 elements"
                       FAIL_REGULAR_EXPRESSION "match torch$")
endif()
