# GPT-2's tokenizer and token shards through the binary (tests/cli_tokens.sh): tokenize alone and
# under mpiexec, train gpt2-tiny on the shards under ZeRO-3 (mpiexec = simulated, exact resume),
# generate, and bad shards.
if(TARGET noeira AND MPIEXEC_EXECUTABLE AND NOEIRA_H5DIFF)
  add_test(NAME cli_tokens_np2
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_tokens.sh ${MPIEXEC_EXECUTABLE}
                   ${MPIEXEC_NUMPROC_FLAG} $<TARGET_FILE:noeira> ${NOEIRA_H5DIFF}
                   ${CMAKE_CURRENT_BINARY_DIR}/cli_tokens ${PROJECT_SOURCE_DIR}/README.md)
  set_tests_properties(cli_tokens_np2 PROPERTIES
                       ENVIRONMENT "${noeira_mpiexec_env};OMP_WAIT_POLICY=PASSIVE"
                       TIMEOUT 240 PROCESSORS 2 SKIP_RETURN_CODE 77)
endif()
