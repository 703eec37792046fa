# Ranks of one job started with other options or data must fail at start-up with one error that
# names what differs (tests/ranks_disagree.sh).
if(TARGET noeira AND MPIEXEC_EXECUTABLE)
  add_test(NAME ranks_disagree_np2
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/ranks_disagree.sh ${MPIEXEC_EXECUTABLE}
                   ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:noeira>
                   ${CMAKE_CURRENT_BINARY_DIR}/ranks_disagree)
  set_tests_properties(ranks_disagree_np2 PROPERTIES
                       ENVIRONMENT
                       "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;OMPI_MCA_plm=isolated"
                       TIMEOUT 240 PROCESSORS 2 SKIP_RETURN_CODE 77)
endif()
