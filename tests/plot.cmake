# `noeira plot` (scripts/plot_runs.py, run by the binary with /usr/bin/python3): curves of two
# tiny real runs rendered to a PNG of the asked size, and its one-line errors
# (tests/plot_check.py). Without matplotlib or Fashion-MNIST the tests skip (77), never pass.
if(TARGET noeira AND EXISTS /usr/bin/python3)
  foreach(check curves errors)
    add_test(NAME plot_${check}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/plot_check.py ${check}
                     $<TARGET_FILE:noeira> ${CMAKE_CURRENT_BINARY_DIR}/plot_${check})
    set_tests_properties(plot_${check} PROPERTIES LABELS plot SKIP_RETURN_CODE 77 TIMEOUT 180)
  endforeach()
endif()
