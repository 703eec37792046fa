# Multi-rank tests of distributed/: a driver that owns MPI_Init, run under mpiexec with 2 and 3
# ranks (3 gives uneven shards), oversubscribed, as root, without ssh.
add_executable(dist_mpi_driver ${CMAKE_CURRENT_LIST_DIR}/dist_mpi_driver.cpp)
target_compile_options(dist_mpi_driver PRIVATE ${noeira_warnings})
target_link_libraries(dist_mpi_driver PRIVATE noeira_train)
target_include_directories(dist_mpi_driver PRIVATE ${CMAKE_CURRENT_LIST_DIR})

set(noeira_mpi_test_env
    "${noeira_mpiexec_env};OMP_NUM_THREADS=1")

# A test of the driver in `mode` under mpiexec at `ranks`, with the test environment plus the
# variables given after the mode (VAR=value ...).
function(noeira_mpi_driver_test name ranks mode)
  add_test(NAME ${name}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks}
                   $<TARGET_FILE:dist_mpi_driver> ${mode})
  set(env "${noeira_mpi_test_env}")
  foreach(var IN LISTS ARGN)
    string(APPEND env ";${var}")
  endforeach()
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${env}" TIMEOUT 120 PROCESSORS 2)
endfunction()

# Sums bit for bit equal to the rank-order left fold (the simulated backend's order), at rank
# counts where Open MPI's own algorithms add otherwise (4, 5) and one where they did not (3).
foreach(ranks 3 4 5)
  noeira_mpi_driver_test(dist_mpi_rank_order_np${ranks} ${ranks} rank_order)
endforeach()

# The same over MPI messages (mpi_ordered_sum.hpp) instead of shared memory.
noeira_mpi_driver_test(dist_mpi_rank_order_mpi_messages_np4 4 rank_order NOEIRA_SHARED_MEMORY=0)

# A job spanning nodes, pretended on this machine (NOEIRA_RANKS_PER_NODE=M: nodes of M consecutive
# ranks): the sums add each node's ranks, then the nodes (distributed/node_layout.hpp), through
# each node's shared memory and messages between the nodes (mpi_node_sums.hpp) where every node
# holds M ranks, over messages alone where the last node holds fewer (5 in nodes of 2) or shared
# memory is off; every collective exact, in place and not, at 4 ranks in nodes of 2. Three nodes
# of 2 (6:2) are the one run whose node sums cross more than two nodes, where the nodes' order
# is more than a + b = b + a.
foreach(run IN ITEMS 4:2 6:3 6:2 5:2)
  string(REPLACE ":" ";" run ${run})
  list(GET run 0 ranks)
  list(GET run 1 per_node)
  noeira_mpi_driver_test(dist_mpi_rank_order_nodes_of${per_node}_np${ranks} ${ranks} rank_order
                         NOEIRA_RANKS_PER_NODE=${per_node})
endforeach()
noeira_mpi_driver_test(dist_mpi_rank_order_nodes_mpi_messages_np4 4 rank_order
                       NOEIRA_RANKS_PER_NODE=2 NOEIRA_SHARED_MEMORY=0)
noeira_mpi_driver_test(dist_mpi_collectives_nodes_of2_np4 4 collectives NOEIRA_RANKS_PER_NODE=2)

# One rank's allreduce buffer in the group's shared memory, the others' private: every rank
# refuses the op with a message naming a rank whose buffer differs (no wrong read, no hang).
add_test(NAME dist_mpi_shared_mismatch_np3
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 3
                 $<TARGET_FILE:dist_mpi_driver> shared_mismatch)
set_tests_properties(dist_mpi_shared_mismatch_np3 PROPERTIES
                     ENVIRONMENT "${noeira_mpi_test_env}" TIMEOUT 60 PROCESSORS 3
                     PASS_REGULAR_EXPRESSION
                     "rank 0 refused: allreduce #[0-9]+ \\(rank 0 of 3\\): shared-memory collectives: rank [12] runs allreduce #[0-9]+ of 4096 f32 \\(a private buffer\\) where rank 0 runs allreduce #[0-9]+ of 4096 f32 \\(shared block 1 at byte 0\\)"
                     FAIL_REGULAR_EXPRESSION "the allreduce completed|no shared memory")

# The last rank of `ranks` fails allreduce #seq the driver's way `mode`: the peers' watchdogs (1 s)
# must abort the job well inside ctest's 30 s, with a non-zero exit and the line that says
# "ranks not arrived: <arrived>". sh prints the exit code so the test can require it non-zero.
function(noeira_mpi_watchdog_test name ranks mode seq arrived)
  math(EXPR last "${ranks} - 1")
  add_test(NAME ${name}
           COMMAND sh -c "\"$0\" \"$@\"; echo \"exit code $?\""
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks}
                   $<TARGET_FILE:dist_mpi_driver> ${mode} 1000 ${last})
  set_tests_properties(${name} PROPERTIES
                       ENVIRONMENT "${noeira_mpi_test_env}" TIMEOUT 30 PROCESSORS ${ranks}
                       PASS_REGULAR_EXPRESSION
                       "noeira: error: watchdog: allreduce #${seq} timed out after 1\\.0 s; ranks not arrived: ${arrived}[^0-9]"
                       FAIL_REGULAR_EXPRESSION
                       "exit code 0[^0-9]|was not aborted|completed without|no shared memory")
endfunction()

foreach(ranks 2 3)
  add_test(NAME dist_mpi_collectives_np${ranks}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks}
                   $<TARGET_FILE:dist_mpi_driver> collectives)
  set_tests_properties(dist_mpi_collectives_np${ranks} PROPERTIES
                       ENVIRONMENT "${noeira_mpi_test_env}" TIMEOUT 120 PROCESSORS ${ranks})

  add_test(NAME dist_mpi_policies_np${ranks}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks}
                   $<TARGET_FILE:dist_mpi_driver> policies)
  set_tests_properties(dist_mpi_policies_np${ranks} PROPERTIES
                       ENVIRONMENT "${noeira_mpi_test_env}" TIMEOUT 120 PROCESSORS ${ranks})

  math(EXPR skipper "${ranks} - 1")
  # The last rank skips allreduce #2 and sleeps 60 s.
  noeira_mpi_watchdog_test(dist_mpi_watchdog_np${ranks} ${ranks} watchdog 2 "${skipper}")
  # The same with the buffer in the group's shared memory (the in-place path; the allocation's
  # two room checks are allreduces #1 and #2, so the skipped one is #4).
  noeira_mpi_watchdog_test(dist_mpi_watchdog_shared_np${ranks} ${ranks} watchdog_shared 4
                           "${skipper}")
  # The last rank enters allreduce #2 and stops itself (SIGSTOP, as `kill -STOP` would): its
  # sequence number says it arrived, so only its heartbeat on the side channel can name it.
  noeira_mpi_watchdog_test(dist_mpi_watchdog_stopped_np${ranks} ${ranks} stopped 2
                           "none; heartbeat stopped: ${skipper}")
endforeach()
# The same across pretended nodes: the node-wise sums' parts wait under the same watchdog.
noeira_mpi_watchdog_test(dist_mpi_watchdog_nodes_of2_np4 4 watchdog_shared 4 3)
set_property(TEST dist_mpi_watchdog_nodes_of2_np4 APPEND PROPERTY ENVIRONMENT
             NOEIRA_RANKS_PER_NODE=2)
