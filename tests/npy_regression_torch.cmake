# A regression trained by noeira from .npy arrays against PyTorch, step by step
# (tests/npy_regression_torch_check.py); and the check can fail: PyTorch at another rate is caught.
find_program(NOEIRA_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(NOEIRA_PYTHON3 python3)
if(TARGET noeira AND NOEIRA_PYTHON3)
  add_test(NAME npy_regression_torch
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/npy_regression_torch_check.py
                   $<TARGET_FILE:noeira> ${CMAKE_CURRENT_BINARY_DIR}/npy_regression_torch)
  add_test(NAME npy_regression_torch_catches_mismatch
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/npy_regression_torch_check.py
                   $<TARGET_FILE:noeira> ${CMAKE_CURRENT_BINARY_DIR}/npy_regression_torch_perturbed
                   --perturb)
  set_tests_properties(npy_regression_torch npy_regression_torch_catches_mismatch PROPERTIES
                       SKIP_RETURN_CODE 77 TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")
  set_tests_properties(npy_regression_torch_catches_mismatch PROPERTIES
                       PASS_REGULAR_EXPRESSION "differs from torch's"
                       FAIL_REGULAR_EXPRESSION "match torch's")
endif()
