# Conv2D and ConvTranspose2D against PyTorch (Debian's python3-torch): the gtest ConvTorch writes
# weights, inputs, outputs and gradients (tests/test_conv_torch.cpp), then
# tests/conv_torch_check.py recomputes them with torch's conv2d / conv_transpose2d and fails on
# any mismatch. The fixture runs the writer first. Without torch the check skips (77), never
# passes.
set(noeira_conv_cases ${CMAKE_CURRENT_BINARY_DIR}/conv_torch/cases.bin)
find_program(NOEIRA_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(NOEIRA_PYTHON3 python3)
add_test(NAME conv_torch_write
         COMMAND ${CMAKE_COMMAND} -E env NOEIRA_CONV_CASES=${noeira_conv_cases}
                 $<TARGET_FILE:noeira_tests> --gtest_filter=ConvTorch.WritesTheCases)
set_tests_properties(conv_torch_write PROPERTIES FIXTURES_SETUP conv_torch TIMEOUT 60)
# ctest does not create the folder the writer writes into.
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/conv_torch)
if(NOEIRA_PYTHON3)
  add_test(NAME conv_torch_check
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/conv_torch_check.py
                   ${noeira_conv_cases})
  set_tests_properties(conv_torch_check PROPERTIES
                       FIXTURES_REQUIRED conv_torch SKIP_RETURN_CODE 77 TIMEOUT 120)
  # The check can fail: one element of one noeira gradient moved by 1e-4 relative must be named.
  add_test(NAME conv_torch_check_catches_mismatch
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/conv_torch_check.py
                   ${noeira_conv_cases} --perturb conv_stride2_dilation2_groups2/grad/weight)
  set_tests_properties(conv_torch_check_catches_mismatch PROPERTIES
                       FIXTURES_REQUIRED conv_torch SKIP_RETURN_CODE 77 TIMEOUT 120
                       PASS_REGULAR_EXPRESSION
                       "conv_stride2_dilation2_groups2/grad/weight: mismatch in 1 of 108 elements"
                       FAIL_REGULAR_EXPRESSION "match torch$")
endif()
