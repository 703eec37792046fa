# BatchNorm against PyTorch (Debian's python3-torch): the gtest BatchNormTorch writes weights,
# inputs, outputs, gradients and running estimates (tests/test_batchnorm_torch.cpp), then
# tests/batchnorm_torch_check.py recomputes them in torch. Without torch the check skips (77).
set(noeira_batchnorm_cases ${CMAKE_CURRENT_BINARY_DIR}/batchnorm_torch/cases.bin)
find_program(NOEIRA_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(NOEIRA_PYTHON3 python3)
add_test(NAME batchnorm_torch_write
         COMMAND ${CMAKE_COMMAND} -E env NOEIRA_BATCHNORM_CASES=${noeira_batchnorm_cases}
                 $<TARGET_FILE:noeira_tests> --gtest_filter=BatchNormTorch.WritesTheCases)
set_tests_properties(batchnorm_torch_write PROPERTIES FIXTURES_SETUP batchnorm_torch TIMEOUT 60)
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/batchnorm_torch)
if(NOEIRA_PYTHON3)
  add_test(NAME batchnorm_torch_check
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/batchnorm_torch_check.py
                   ${noeira_batchnorm_cases})
  set_tests_properties(batchnorm_torch_check PROPERTIES
                       FIXTURES_REQUIRED batchnorm_torch SKIP_RETURN_CODE 77 TIMEOUT 120)
  # The check can fail: one element of one noeira gradient moved by 1e-4 relative must be named.
  add_test(NAME batchnorm_torch_check_catches_mismatch
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/batchnorm_torch_check.py
                   ${noeira_batchnorm_cases} --perturb batchnorm2d/step1/grad/weight)
  set_tests_properties(batchnorm_torch_check_catches_mismatch PROPERTIES
                       FIXTURES_REQUIRED batchnorm_torch SKIP_RETURN_CODE 77 TIMEOUT 120
                       PASS_REGULAR_EXPRESSION
                       "batchnorm2d/step1/grad/weight: mismatch in 1 of 3 elements"
                       FAIL_REGULAR_EXPRESSION "match torch$")
endif()
