# tests/test_cli.cpp runs the noeira binary (NOEIRA_BINARY): build it with the tests so they never
# run a stale binary.
if(TARGET noeira)
  add_dependencies(noeira_tests noeira)
endif()
