# Every ctest entry carries its own TIMEOUT (tests/check_timeouts.py lists those that do not).
find_program(NOEIRA_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(NOEIRA_PYTHON3 python3)
if(NOEIRA_PYTHON3)
  add_test(NAME every_test_has_a_timeout
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/check_timeouts.py
                   ${CMAKE_CTEST_COMMAND} ${PROJECT_BINARY_DIR})
  set_tests_properties(every_test_has_a_timeout PROPERTIES TIMEOUT 60)
endif()
