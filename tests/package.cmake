# `cmake --install` and find_package(noeira) from outside the tree: tests/package_example.sh
# installs this build, builds examples/custom_model against the install and runs it (ZeRO-2 on
# two simulated ranks). The install needs the libraries and the binary built (`cmake --build`
# first). Most of its time is compiling the example, which instantiates the trainer. Not in the
# sanitizer build: its libraries need the sanitizer runtime at link time, which an outside
# project does not ask for (the Release suite runs the test).
if(TARGET noeira AND NOT NOEIRA_SANITIZE)
  add_test(NAME package_example
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/package_example.sh ${CMAKE_COMMAND}
                   ${CMAKE_GENERATOR} ${CMAKE_C_COMPILER} ${CMAKE_CXX_COMPILER}
                   ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR}
                   ${CMAKE_CURRENT_BINARY_DIR}/package_example)
  set_tests_properties(package_example PROPERTIES
                       LABELS package_example TIMEOUT 300 PROCESSORS 2
                       ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
endif()
