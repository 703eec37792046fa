# The image leaves against PyTorch (Debian's python3-torch): the gtest PoolTorch writes inputs,
# outputs and input gradients (tests/test_pool_torch.cpp), then tests/pool_torch_check.py
# recomputes them with torch.nn.functional and fails on any mismatch. The fixture runs the writer
# first. Without torch the check skips (77), never passes.
set(noeira_pool_cases ${CMAKE_CURRENT_BINARY_DIR}/pool_torch/cases.bin)
find_program(NOEIRA_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(NOEIRA_PYTHON3 python3)
add_test(NAME pool_torch_write
         COMMAND ${CMAKE_COMMAND} -E env NOEIRA_POOL_CASES=${noeira_pool_cases}
                 $<TARGET_FILE:noeira_tests> --gtest_filter=PoolTorch.WritesTheCases)
set_tests_properties(pool_torch_write PROPERTIES FIXTURES_SETUP pool_torch TIMEOUT 60)
# ctest does not create the folder the writer writes into.
file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/pool_torch)
if(NOEIRA_PYTHON3)
  add_test(NAME pool_torch_check
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/pool_torch_check.py
                   ${noeira_pool_cases})
  set_tests_properties(pool_torch_check PROPERTIES
                       FIXTURES_REQUIRED pool_torch SKIP_RETURN_CODE 77 TIMEOUT 120)
  # The check can fail: one element of one noeira gradient moved by 1e-4 relative must be named.
  add_test(NAME pool_torch_check_catches_mismatch
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/pool_torch_check.py
                   ${noeira_pool_cases} --perturb max_pool_overlapping/dx)
  set_tests_properties(pool_torch_check_catches_mismatch PROPERTIES
                       FIXTURES_REQUIRED pool_torch SKIP_RETURN_CODE 77 TIMEOUT 120
                       PASS_REGULAR_EXPRESSION
                       "max_pool_overlapping/dx: mismatch in 1 of 378 elements"
                       FAIL_REGULAR_EXPRESSION "match torch$")
endif()
