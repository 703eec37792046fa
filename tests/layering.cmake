# The include direction (tests/check_layering.sh): every #include in kernels/, src/,
# distributed/, io/ must run down the layers that CMakeLists.txt links in.
add_test(NAME layering COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_layering.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(layering PROPERTIES TIMEOUT 30)

# The checker can fail: on tests/data/layering, whose src/core/wrong.hpp includes train, it must
# exit non-zero naming that file and line, and name no other file. sh prints the exit code so
# that the test can require it to be non-zero.
add_test(NAME layering_catches_wrong_way
         COMMAND sh -c "\"$0\" \"$@\"; echo \"exit code $?\""
                 bash ${CMAKE_CURRENT_LIST_DIR}/check_layering.sh ${CMAKE_CURRENT_LIST_DIR}/data/layering)
set_tests_properties(layering_catches_wrong_way PROPERTIES
                     TIMEOUT 30
                     PASS_REGULAR_EXPRESSION
                     "src/core/wrong\\.hpp:4: #include \"train/trainer\\.hpp\" runs the wrong way"
                     FAIL_REGULAR_EXPRESSION
                     "exit code 0[^0-9]|(kernels/table|core/tensor|train/trainer)\\.hpp:[0-9]")
