# Ranks of one job started with other options or data must fail at start-up with one error that
# names what differs (tests/ranks_disagree.sh).
if(TARGET noeira AND MPIEXEC_EXECUTABLE)
  add_test(NAME ranks_disagree_np2
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/ranks_disagree.sh ${MPIEXEC_EXECUTABLE}
                   ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:noeira>
                   ${CMAKE_CURRENT_BINARY_DIR}/ranks_disagree)
  set_tests_properties(ranks_disagree_np2 PROPERTIES
                       ENVIRONMENT
                       "${noeira_mpiexec_env}"
                       TIMEOUT 240 PROCESSORS 2 SKIP_RETURN_CODE 77)
endif()

# One rank of a training job stopped with SIGSTOP: the watchdog names it by its heartbeat
# (tests/watchdog_stop.sh; the deterministic case, a rank stopped inside the op, is
# dist_mpi_watchdog_stopped_np*).
if(TARGET noeira AND MPIEXEC_EXECUTABLE)
  add_test(NAME watchdog_stop_np2
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/watchdog_stop.sh ${MPIEXEC_EXECUTABLE}
                   ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:noeira>
                   ${CMAKE_CURRENT_BINARY_DIR}/watchdog_stop)
  set_tests_properties(watchdog_stop_np2 PROPERTIES
                       ENVIRONMENT
                       "${noeira_mpiexec_env}"
                       TIMEOUT 120 PROCESSORS 2 SKIP_RETURN_CODE 77)
endif()

# Under mpiexec the ranks are the processes and their nodes the machines they run on: asking for
# simulated ranks or simulated nodes there is a one-line error and a non-zero exit on every rank.
if(TARGET noeira AND MPIEXEC_EXECUTABLE)
  foreach(flag IN ITEMS sim-ranks sim-ranks-per-node)
    add_test(NAME refuses_${flag}_under_mpiexec_np2
             COMMAND sh -c "\"$0\" \"$@\" </dev/null; echo \"exit code $?\""
                     ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 $<TARGET_FILE:noeira> train
                     --model mlp --epochs 1 --limit-train 100 --${flag} 2
                     --out ${CMAKE_CURRENT_BINARY_DIR}/refuses_${flag})
    set_tests_properties(refuses_${flag}_under_mpiexec_np2 PROPERTIES
                         ENVIRONMENT
                         "${noeira_mpiexec_env}"
                         TIMEOUT 60 PROCESSORS 2
                         PASS_REGULAR_EXPRESSION
                         "noeira: error: --${flag} 2 under an MPI launcher: .*exit code [1-9]"
                         FAIL_REGULAR_EXPRESSION "exit code 0[^0-9]|saved ")
  endforeach()
endif()

# A refusal every rank reaches alike (an option, the data, rank 0's output directory, the
# checkpoint to resume) is said once and ends the job without MPI_Abort (tests/refusal_once.sh;
# noeira_mpi_test_env is tests/dist.cmake's, included before this file).
if(TARGET noeira AND MPIEXEC_EXECUTABLE)
  add_test(NAME refusal_said_once_np2
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/refusal_once.sh ${MPIEXEC_EXECUTABLE}
                   ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:noeira>
                   ${CMAKE_CURRENT_BINARY_DIR}/refusal_once)
  set_tests_properties(refusal_said_once_np2 PROPERTIES ENVIRONMENT "${noeira_mpi_test_env}"
                       TIMEOUT 120 PROCESSORS 2)
endif()
