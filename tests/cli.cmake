# tests/test_cli.cpp runs the noeira binary (NOEIRA_BINARY): build it with the tests so they never
# run a stale binary.
if(TARGET noeira)
  add_dependencies(noeira_tests noeira)
endif()

# The binary under a real MPI launch: `mpiexec -n 2 noeira train --policy zero3` must save the
# same parameters, bit for bit, as `noeira train --sim-ranks 2 --policy zero3`.
find_program(NOEIRA_H5DIFF h5diff)
if(TARGET noeira AND MPIEXEC_EXECUTABLE AND NOEIRA_H5DIFF)
  add_test(NAME cli_mpi_train_zero3_np2
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_mpi_train.sh ${MPIEXEC_EXECUTABLE}
                   ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:noeira> ${NOEIRA_H5DIFF}
                   ${CMAKE_CURRENT_BINARY_DIR}/cli_mpi_train)
  set_tests_properties(cli_mpi_train_zero3_np2 PROPERTIES
                       ENVIRONMENT
                       "${noeira_mpiexec_env}"
                       TIMEOUT 120 PROCESSORS 2 SKIP_RETURN_CODE 77)
endif()

# The same bits at rank counts where MPI's own reduction order would differ from the simulated
# backend's (tests/cli_mpi_sim_equal.sh): every policy at 4 ranks, DDP and ZeRO-3 at 8; and
# gradient accumulation and ZeRO-3 persistence replayed as faithfully (DDP's accumulation in the
# leaves, ZeRO-2's in reduced slices, ZeRO-3 with its two small units persisted), and ZeRO-3
# without prefetch (every other ZeRO-3 run here prefetches: the default).
if(TARGET noeira AND MPIEXEC_EXECUTABLE AND NOEIRA_H5DIFF)
  function(noeira_mpi_sim_equal name ranks policy)
    add_test(NAME ${name}
             COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_mpi_sim_equal.sh ${MPIEXEC_EXECUTABLE}
                     ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:noeira> ${NOEIRA_H5DIFF}
                     ${CMAKE_CURRENT_BINARY_DIR}/${name} ${ranks} ${policy} ${ARGN})
    set_tests_properties(${name} PROPERTIES
                         ENVIRONMENT
                         "${noeira_mpiexec_env}"
                         TIMEOUT 120 PROCESSORS 2 SKIP_RETURN_CODE 77)
  endfunction()
  foreach(run IN ITEMS ddp:4 zero1:4 zero2:4 zero3:4 ddp:8 zero3:8)
    string(REPLACE ":" ";" run "${run}")
    list(GET run 0 policy)
    list(GET run 1 ranks)
    noeira_mpi_sim_equal(cli_mpi_sim_equal_${policy}_np${ranks} ${ranks} ${policy})
  endforeach()
  noeira_mpi_sim_equal(cli_mpi_sim_equal_ddp_accum2_np4 4 ddp --accum 2)
  noeira_mpi_sim_equal(cli_mpi_sim_equal_zero2_accum4_np3 3 zero2 --accum 4)
  noeira_mpi_sim_equal(cli_mpi_sim_equal_zero3_persist_np4 4 zero3 --accum 2
                       --zero3-persist-below 40000)
  noeira_mpi_sim_equal(cli_mpi_sim_equal_zero3_no_prefetch_np3 3 zero3 --accum 2
                       --no-zero3-prefetch)
  # One node: the ops above go through shared memory (distributed/mpi_shared_sums.hpp). Its chunks
  # cut small (10 KiB regions: every gradient op in dozens of chunks), and the path over MPI
  # messages that a job spanning nodes takes, give the same bits.
  noeira_mpi_sim_equal(cli_mpi_sim_equal_zero2_small_chunks_np3 3 zero2 --accum 2)
  set_property(TEST cli_mpi_sim_equal_zero2_small_chunks_np3 APPEND PROPERTY ENVIRONMENT
               "NOEIRA_SHARED_MEMORY_MB=0.01")
  # bf16 reductions (--reduce-dtype bf16): the fp32 fold of bf16 inputs, in rank order, through
  # shared memory and over MPI messages alike.
  noeira_mpi_sim_equal(cli_mpi_sim_equal_ddp_bf16_reduce_np4 4 ddp --reduce-dtype bf16)
  noeira_mpi_sim_equal(cli_mpi_sim_equal_zero2_bf16_reduce_accum2_np3 3 zero2 --accum 2
                       --reduce-dtype bf16)
  noeira_mpi_sim_equal(cli_mpi_sim_equal_zero3_bf16_reduce_mpi_messages_np4 4 zero3
                       --reduce-dtype bf16)
  set_property(TEST cli_mpi_sim_equal_zero3_bf16_reduce_mpi_messages_np4 APPEND PROPERTY
               ENVIRONMENT "NOEIRA_SHARED_MEMORY=0")
  # bf16 gradients (--grad-dtype bf16): whole ones reduced in place in their bf16 buffer (ZeRO-1
  # through shared memory, DDP's buckets over MPI messages), sliced ones staged (ZeRO-3).
  noeira_mpi_sim_equal(cli_mpi_sim_equal_zero1_bf16_grads_np4 4 zero1 --reduce-dtype bf16
                       --grad-dtype bf16)
  noeira_mpi_sim_equal(cli_mpi_sim_equal_ddp_bf16_grads_mpi_messages_np3 3 ddp --reduce-dtype bf16
                       --grad-dtype bf16)
  set_property(TEST cli_mpi_sim_equal_ddp_bf16_grads_mpi_messages_np3 APPEND PROPERTY
               ENVIRONMENT "NOEIRA_SHARED_MEMORY=0")
  noeira_mpi_sim_equal(cli_mpi_sim_equal_zero3_bf16_grads_np3 3 zero3 --reduce-dtype bf16
                       --grad-dtype bf16 --precision bf16)
  # Mixed precision (--precision bf16): the bf16 parameter copies all-gathered after the step
  # (ZeRO-1) and per unit with persisted units (ZeRO-3), through shared memory and over MPI
  # messages.
  noeira_mpi_sim_equal(cli_mpi_sim_equal_zero1_bf16_np4 4 zero1 --precision bf16)
  noeira_mpi_sim_equal(cli_mpi_sim_equal_zero3_bf16_persist_np3 3 zero3 --precision bf16
                       --accum 2 --zero3-persist-below 40000)
  noeira_mpi_sim_equal(cli_mpi_sim_equal_zero2_bf16_mpi_messages_np3 3 zero2 --precision bf16)
  set_property(TEST cli_mpi_sim_equal_zero2_bf16_mpi_messages_np3 APPEND PROPERTY
               ENVIRONMENT "NOEIRA_SHARED_MEMORY=0")
  noeira_mpi_sim_equal(cli_mpi_sim_equal_zero3_mpi_messages_np4 4 zero3)
  noeira_mpi_sim_equal(cli_mpi_sim_equal_ddp_mpi_messages_np4 4 ddp)
  foreach(name IN ITEMS cli_mpi_sim_equal_zero3_mpi_messages_np4 cli_mpi_sim_equal_ddp_mpi_messages_np4)
    set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT "NOEIRA_SHARED_MEMORY=0")
  endforeach()
  # A job spanning nodes, pretended here (NOEIRA_RANKS_PER_NODE=M): mpiexec's run adds each node's
  # ranks, then the nodes, and --sim-ranks-per-node M replays it bit for bit. Every policy at 4
  # ranks in nodes of 2 (shared memory inside the nodes, messages between them:
  # distributed/mpi_node_sums.hpp); ZeRO-3 in nodes of 3; bf16 reductions (summed in fp32 across
  # the nodes, rounded once), with bf16 gradients and parameters under ZeRO-3; nodes of unequal
  # size (5 ranks in nodes of 2: messages only).
  function(noeira_mpi_sim_equal_nodes name ranks per_node policy)
    noeira_mpi_sim_equal(${name} ${ranks} ${policy} ${ARGN})
    set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT "NOEIRA_RANKS_PER_NODE=${per_node}")
  endfunction()
  foreach(policy IN ITEMS ddp zero1 zero2 zero3)
    noeira_mpi_sim_equal_nodes(cli_mpi_sim_equal_${policy}_nodes_of2_np4 4 2 ${policy})
  endforeach()
  noeira_mpi_sim_equal_nodes(cli_mpi_sim_equal_zero3_nodes_of3_np6 6 3 zero3 --accum 2)
  noeira_mpi_sim_equal_nodes(cli_mpi_sim_equal_ddp_bf16_reduce_nodes_of2_np4 4 2 ddp
                             --reduce-dtype bf16)
  noeira_mpi_sim_equal_nodes(cli_mpi_sim_equal_zero3_bf16_nodes_of2_np4 4 2 zero3
                             --precision bf16 --reduce-dtype bf16 --grad-dtype bf16)
  noeira_mpi_sim_equal_nodes(cli_mpi_sim_equal_zero2_nodes_of2_np5 5 2 zero2)
endif()

# A CPU run loads no CUDA library; --device cuda loads the plugin, whose absence or foreign
# build is a clear error: tests/cli_cuda_plugin.sh.
if(TARGET noeira)
  add_test(NAME cli_cuda_plugin
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_cuda_plugin.sh $<TARGET_FILE:noeira>
                   "$<$<TARGET_EXISTS:noeira_cuda>:$<TARGET_FILE:noeira_cuda>>"
                   ${CMAKE_CURRENT_BINARY_DIR}/cli_cuda_plugin)
  set_tests_properties(cli_cuda_plugin PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77
                       ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
endif()

# A CNN with BatchNorm (buffers, synchronized statistics): tests/cli_vision.sh.
find_program(NOEIRA_H5LS h5ls)
if(TARGET noeira AND MPIEXEC_EXECUTABLE AND NOEIRA_H5DIFF AND NOEIRA_H5LS)
  add_test(NAME cli_vision_np2
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_vision.sh ${MPIEXEC_EXECUTABLE}
                   ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:noeira> ${NOEIRA_H5DIFF} ${NOEIRA_H5LS}
                   ${CMAKE_CURRENT_BINARY_DIR}/cli_vision)
  set_tests_properties(cli_vision_np2 PROPERTIES
                       ENVIRONMENT
                       "${noeira_mpiexec_env};OMP_WAIT_POLICY=PASSIVE"
                       TIMEOUT 240 PROCESSORS 2 SKIP_RETURN_CODE 77)
endif()

# The same for the language models on text, with resume, eval and generate
# (tests/cli_language_model.sh): a GPT and a recurrent LM.
if(TARGET noeira AND MPIEXEC_EXECUTABLE AND NOEIRA_H5DIFF)
  foreach(model gpt-tiny lstm-tiny)
    string(REGEX REPLACE "-tiny$" "" family ${model})
    add_test(NAME cli_${family}_np2
             COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_language_model.sh ${MPIEXEC_EXECUTABLE}
                     ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:noeira> ${NOEIRA_H5DIFF}
                     ${CMAKE_CURRENT_BINARY_DIR}/cli_${family} ${model})
    set_tests_properties(cli_${family}_np2 PROPERTIES
                         ENVIRONMENT
                         "${noeira_mpiexec_env};OMP_WAIT_POLICY=PASSIVE"
                         TIMEOUT 180 PROCESSORS 2 SKIP_RETURN_CODE 77)
  endforeach()
  # --precision bf16: MPI = simulated = DDP, fp32 masters in the files, exact resume, eval
  # (tests/cli_mixed_precision.sh).
  add_test(NAME cli_bf16_np2
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_mixed_precision.sh ${MPIEXEC_EXECUTABLE}
                   ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:noeira> ${NOEIRA_H5DIFF}
                   ${CMAKE_CURRENT_BINARY_DIR}/cli_bf16)
  set_tests_properties(cli_bf16_np2 PROPERTIES
                       ENVIRONMENT
                       "${noeira_mpiexec_env};OMP_WAIT_POLICY=PASSIVE"
                       TIMEOUT 180 PROCESSORS 2 SKIP_RETURN_CODE 77)
endif()

# model.h5 read without noeira: examples/read_model_h5.py from the file's own attributes.
find_program(NOEIRA_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(TARGET noeira AND NOEIRA_PYTHON3)
  add_test(NAME cli_model_h5_self_describing
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_model_h5.sh $<TARGET_FILE:noeira>
                   ${NOEIRA_PYTHON3} ${PROJECT_SOURCE_DIR}/examples/read_model_h5.py
                   ${CMAKE_CURRENT_BINARY_DIR}/cli_model_h5)
  set_tests_properties(cli_model_h5_self_describing PROPERTIES
                       ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE" TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()

# safetensors export, eval and --init-from through the binary (tests/cli_safetensors.sh).
if(TARGET noeira)
  add_test(NAME cli_safetensors
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_safetensors.sh $<TARGET_FILE:noeira>
                   ${CMAKE_CURRENT_BINARY_DIR}/cli_safetensors)
  set_tests_properties(cli_safetensors PROPERTIES
                       ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE" TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
