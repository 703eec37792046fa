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
                       FIXTURES_SETUP noeira_installed
                       ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
endif()

# examples/npy_classifier against the same install (package_example makes it: the fixture
# noeira_installed): a program of its own model with noeira's whole command line, under mpiexec and on
# simulated ranks, resumed on one rank (tests/example_npy_classifier.sh).
find_program(NOEIRA_H5DIFF h5diff)
if(TARGET noeira AND NOT NOEIRA_SANITIZE AND MPIEXEC_EXECUTABLE AND NOEIRA_H5DIFF)
  add_test(NAME example_npy_classifier
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/example_npy_classifier.sh ${CMAKE_COMMAND}
                   ${CMAKE_GENERATOR} ${CMAKE_C_COMPILER} ${CMAKE_CXX_COMPILER}
                   ${CMAKE_CURRENT_BINARY_DIR}/package_example/prefix ${PROJECT_SOURCE_DIR}
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${NOEIRA_H5DIFF}
                   ${CMAKE_CURRENT_BINARY_DIR}/example_npy_classifier)
  set_tests_properties(example_npy_classifier PROPERTIES
                       FIXTURES_REQUIRED noeira_installed LABELS package_example
                       ENVIRONMENT "${noeira_mpiexec_env};OMP_WAIT_POLICY=PASSIVE"
                       TIMEOUT 400 PROCESSORS 2 SKIP_RETURN_CODE 77)
endif()

# examples/in_situ_surrogate against the same install: an MPI simulation of three ranks that gives
# two of them to noeira over a communicator of its own (tests/example_in_situ_surrogate.sh).
if(TARGET noeira AND NOT NOEIRA_SANITIZE AND MPIEXEC_EXECUTABLE)
  add_test(NAME example_in_situ_surrogate
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/example_in_situ_surrogate.sh ${CMAKE_COMMAND}
                   ${CMAKE_GENERATOR} ${CMAKE_C_COMPILER} ${CMAKE_CXX_COMPILER}
                   ${CMAKE_CURRENT_BINARY_DIR}/package_example/prefix ${PROJECT_SOURCE_DIR}
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG}
                   ${CMAKE_CURRENT_BINARY_DIR}/example_in_situ_surrogate)
  set_tests_properties(example_in_situ_surrogate PROPERTIES
                       FIXTURES_REQUIRED noeira_installed LABELS package_example
                       ENVIRONMENT "${noeira_mpiexec_env};OMP_NUM_THREADS=1;OMP_WAIT_POLICY=PASSIVE"
                       TIMEOUT 400 PROCESSORS 2)
endif()

# examples/own_transformer against the same install: a language model of the program's own
# design on a text of its own (tests/example_own_transformer.sh).
if(TARGET noeira AND NOT NOEIRA_SANITIZE AND MPIEXEC_EXECUTABLE AND NOEIRA_H5DIFF)
  add_test(NAME example_own_transformer
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/example_own_transformer.sh ${CMAKE_COMMAND}
                   ${CMAKE_GENERATOR} ${CMAKE_C_COMPILER} ${CMAKE_CXX_COMPILER}
                   ${CMAKE_CURRENT_BINARY_DIR}/package_example/prefix ${PROJECT_SOURCE_DIR}
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${NOEIRA_H5DIFF}
                   ${CMAKE_CURRENT_BINARY_DIR}/example_own_transformer)
  set_tests_properties(example_own_transformer PROPERTIES
                       FIXTURES_REQUIRED noeira_installed LABELS package_example
                       ENVIRONMENT "${noeira_mpiexec_env};OMP_WAIT_POLICY=PASSIVE"
                       TIMEOUT 400 PROCESSORS 2)
endif()
