# The NCCL backend's tests (tests/dist_nccl_test.cpp): their own GoogleTest binary, because it
# owns MPI initialization (NCCL is bootstrapped through MPI). Run test by test as one MPI
# singleton rank, and under mpiexec with 2 ranks; a GPU test that cannot run (no GPU, fewer GPUs
# than ranks on the node, a build without CUDA) reports skipped with its reason, never passed.
add_executable(dist_nccl_test ${CMAKE_CURRENT_LIST_DIR}/dist_nccl_test.cpp)
target_compile_options(dist_nccl_test PRIVATE ${noeira_warnings})
target_link_libraries(dist_nccl_test PRIVATE noeira_train GTest::gtest)
target_include_directories(dist_nccl_test PRIVATE ${CMAKE_CURRENT_LIST_DIR})
# The test's own device buffers and streams; the group itself comes from the CUDA plugin, which
# shares this one libcudart.
if(NOEIRA_CUDA)
  target_link_libraries(dist_nccl_test PRIVATE CUDA::cudart)
endif()

set(noeira_nccl_test_env
    "${noeira_mpiexec_env};OMP_NUM_THREADS=1")

gtest_discover_tests(dist_nccl_test DISCOVERY_TIMEOUT 60 TEST_SUFFIX ".np1"
                     PROPERTIES ENVIRONMENT "${noeira_nccl_test_env}" TIMEOUT 300)

if(NOEIRA_CUDA)
  # Whole suites under mpiexec: every rank runs the same tests in the same order. A skipped
  # suite prints gtest's SKIPPED marker, which ctest reports as skipped.
  foreach(suite DistNccl DistNcclSetup)
    add_test(NAME dist_nccl_${suite}_np2
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2
                     $<TARGET_FILE:dist_nccl_test> --gtest_filter=${suite}.*)
    set_tests_properties(dist_nccl_${suite}_np2 PROPERTIES
                         ENVIRONMENT "${noeira_nccl_test_env}" TIMEOUT 300 PROCESSORS 2
                         SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  endforeach()

  # Rank 1 skips allreduce #2 and sleeps 60 s; rank 0's watchdog (1 s) must abort the NCCL
  # communicator and the job, naming rank 1, well inside the 30 s (as dist_mpi_watchdog_np2).
  add_test(NAME dist_nccl_watchdog_np2
           COMMAND sh -c "\"$0\" \"$@\"; echo \"exit code $?\""
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2
                   $<TARGET_FILE:dist_nccl_test> watchdog 1000 1)
  set_tests_properties(dist_nccl_watchdog_np2 PROPERTIES
                       ENVIRONMENT "${noeira_nccl_test_env}" TIMEOUT 30 PROCESSORS 2
                       SKIP_REGULAR_EXPRESSION "SKIPPED: "
                       PASS_REGULAR_EXPRESSION
                       "noeira: error: watchdog: allreduce #2 timed out after 1\\.0 s; ranks not arrived: 1[^0-9]"
                       FAIL_REGULAR_EXPRESSION "exit code 0[^0-9]|was not aborted|completed without")
endif()
