# SIGKILL of one rank of `mpiexec -n 2 noeira train` that checkpoints every step, at random
# moments: `latest` must stay loadable (tests/checkpoint_kill.sh). The single-process kills (the
# simulated backend) are tests/test_checkpoint_matrix.cpp.
if(TARGET noeira AND MPIEXEC_EXECUTABLE)
  add_test(NAME checkpoint_kill_one_rank_np2
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/checkpoint_kill.sh ${MPIEXEC_EXECUTABLE}
                   ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:noeira>
                   ${CMAKE_CURRENT_BINARY_DIR}/checkpoint_kill 3)
  set_tests_properties(checkpoint_kill_one_rank_np2 PROPERTIES
                       ENVIRONMENT
                       "${noeira_mpiexec_env}"
                       TIMEOUT 180 PROCESSORS 2 SKIP_RETURN_CODE 77)
endif()
