# A user's arrays (--data npy) under a real MPI launch: the same bits as simulated ranks, and a
# resume on one rank under another policy (tests/cli_npy_mpi.sh).
find_program(NOEIRA_H5DIFF h5diff)
if(TARGET noeira AND MPIEXEC_EXECUTABLE AND NOEIRA_H5DIFF)
  add_test(NAME cli_npy_mpi_zero3_np2
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_npy_mpi.sh ${MPIEXEC_EXECUTABLE}
                   ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:noeira> ${NOEIRA_H5DIFF}
                   ${CMAKE_CURRENT_BINARY_DIR}/cli_npy_mpi)
  set_tests_properties(cli_npy_mpi_zero3_np2 PROPERTIES
                       ENVIRONMENT
                       "${noeira_mpiexec_env}"
                       TIMEOUT 120 PROCESSORS 2 SKIP_RETURN_CODE 77)
endif()

# --stream-data: resident memory flat in the data set's size (tests/stream_memory.sh). Not in the
# sanitizer build, whose shadow memory is no measure of the resident set.
if(TARGET noeira AND NOT NOEIRA_SANITIZE)
  add_test(NAME stream_data_memory
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/stream_memory.sh $<TARGET_FILE:noeira>
                   ${CMAKE_CURRENT_BINARY_DIR}/stream_memory)
  set_tests_properties(stream_data_memory PROPERTIES
                       TIMEOUT 240 SKIP_RETURN_CODE 77 ENVIRONMENT "OMP_NUM_THREADS=1")
endif()
