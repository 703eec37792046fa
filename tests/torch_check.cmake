# A check against PyTorch (Debian's python3-torch), as llm.c checks itself against nanoGPT: the
# gtest `writer` (e.g. GptTorch.WritesTheCase) writes noeira's inputs, outputs and gradients
# (tests/torch_case_file.hpp; a whole model's also its weights as model.h5) to `path`, given in
# $`env`; then tests/<name>_check.py recomputes them in float64 and fails on any mismatch. The
# fixture runs the writer first. Without torch (or h5py) the check skips (77), never passes. A
# third test shows the check can fail: one element of the tensor `perturb` moved by 1e-4
# relative must be named, with the message `caught`. A seventh argument names the check script
# when it is not <name>_check.py (two cases of one script).
find_program(NOEIRA_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(NOEIRA_PYTHON3 python3)

function(noeira_torch_check name writer env path perturb caught)
  add_test(NAME ${name}_write
           COMMAND ${CMAKE_COMMAND} -E env ${env}=${path} OMP_NUM_THREADS=2
                   $<TARGET_FILE:noeira_tests> --gtest_filter=${writer})
  set_tests_properties(${name}_write PROPERTIES FIXTURES_SETUP ${name} TIMEOUT 60)
  # ctest does not create the folder a writer writes its file into.
  get_filename_component(parent ${path} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  if(NOT NOEIRA_PYTHON3)
    return()
  endif()
  set(script ${name})
  if(ARGC GREATER 6)
    set(script ${ARGV6})
  endif()
  set(check ${CMAKE_CURRENT_LIST_DIR}/${script}_check.py)
  add_test(NAME ${name}_check COMMAND ${NOEIRA_PYTHON3} ${check} ${path})
  set_tests_properties(${name}_check PROPERTIES
                       FIXTURES_REQUIRED ${name} SKIP_RETURN_CODE 77 TIMEOUT 120)
  add_test(NAME ${name}_check_catches_mismatch
           COMMAND ${NOEIRA_PYTHON3} ${check} ${path} --perturb ${perturb})
  set_tests_properties(${name}_check_catches_mismatch PROPERTIES
                       FIXTURES_REQUIRED ${name} SKIP_RETURN_CODE 77 TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "${caught}"
                       FAIL_REGULAR_EXPRESSION "match torch$")
endfunction()
