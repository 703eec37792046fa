# One training step of resnet20 against PyTorch (Debian's python3-torch): the gtest ResNetTorch
# writes weights, buffers, input, logits, loss and gradients (tests/test_resnet_torch.cpp), then
# tests/resnet_torch_check.py recomputes them in torch. Without torch the check skips (77).
set(noeira_resnet_cases ${CMAKE_CURRENT_BINARY_DIR}/resnet_torch/cases.bin)
find_program(NOEIRA_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(NOEIRA_PYTHON3 python3)
add_test(NAME resnet_torch_write
         COMMAND ${CMAKE_COMMAND} -E env NOEIRA_RESNET_CASES=${noeira_resnet_cases}
                 $<TARGET_FILE:noeira_tests> --gtest_filter=ResNetTorch.WritesTheCase)
set_tests_properties(resnet_torch_write PROPERTIES FIXTURES_SETUP resnet_torch TIMEOUT 60)
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/resnet_torch)
if(NOEIRA_PYTHON3)
  add_test(NAME resnet_torch_check
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/resnet_torch_check.py
                   ${noeira_resnet_cases})
  set_tests_properties(resnet_torch_check PROPERTIES
                       FIXTURES_REQUIRED resnet_torch SKIP_RETURN_CODE 77 TIMEOUT 120)
  # The check can fail: one element of one noeira gradient moved by 1e-4 relative must be named.
  add_test(NAME resnet_torch_check_catches_mismatch
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/resnet_torch_check.py
                   ${noeira_resnet_cases} --perturb grad/layer2.0.downsample.0.weight)
  set_tests_properties(resnet_torch_check_catches_mismatch PROPERTIES
                       FIXTURES_REQUIRED resnet_torch SKIP_RETURN_CODE 77 TIMEOUT 120
                       PASS_REGULAR_EXPRESSION
                       "grad/layer2\\.0\\.downsample\\.0\\.weight: mismatch in 1 of 512 elements"
                       FAIL_REGULAR_EXPRESSION "match torch$")
endif()
