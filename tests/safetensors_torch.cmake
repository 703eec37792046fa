# noeira's safetensors files against PyTorch's models (Debian's python3-torch and torchvision;
# numpy reads and writes the format, tests/safetensors_np.py), both ways:
#   safetensors_torch_write_noeira (gtest) -> safetensors_torch_check (python): PyTorch loads
#     noeira's exports (--names pytorch) of mlp, gpt-tiny and resnet18 and reproduces their logits;
#   safetensors_torch_write_torch (python) -> safetensors_torch_read (gtest): noeira loads files
#     written from those PyTorch models and reproduces PyTorch's logits.
# Without torch the python steps skip (77), and the gtest reading their files is not run.
set(noeira_st_dir ${CMAKE_CURRENT_BINARY_DIR}/safetensors_torch)
find_program(NOEIRA_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(NOEIRA_PYTHON3 python3)
add_test(NAME safetensors_torch_write_noeira
         COMMAND ${CMAKE_COMMAND} -E env NOEIRA_SAFETENSORS_TORCH_DIR=${noeira_st_dir}
                 OMP_NUM_THREADS=2
                 $<TARGET_FILE:noeira_tests> --gtest_filter=SafetensorsTorch.WritesNoeiraModels)
set_tests_properties(safetensors_torch_write_noeira PROPERTIES
                     FIXTURES_SETUP safetensors_noeira TIMEOUT 120)
if(NOEIRA_PYTHON3)
  add_test(NAME safetensors_torch_check
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/safetensors_torch_check.py
                   check ${noeira_st_dir})
  set_tests_properties(safetensors_torch_check PROPERTIES
                       FIXTURES_REQUIRED safetensors_noeira SKIP_RETURN_CODE 77 TIMEOUT 120)
  # The check can fail: one gpt-tiny weight moved by 1e-2 must be caught.
  add_test(NAME safetensors_torch_check_catches_mismatch
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/safetensors_torch_check.py
                   check ${noeira_st_dir} --perturb gpt-tiny)
  set_tests_properties(safetensors_torch_check_catches_mismatch PROPERTIES
                       FIXTURES_REQUIRED safetensors_noeira SKIP_RETURN_CODE 77 TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "gpt-tiny: noeira's logits differ from torch's"
                       FAIL_REGULAR_EXPRESSION "reproduce their logits in torch")
  add_test(NAME safetensors_torch_write_torch
           COMMAND ${NOEIRA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/safetensors_torch_check.py
                   write ${noeira_st_dir})
  set_tests_properties(safetensors_torch_write_torch PROPERTIES
                       FIXTURES_SETUP safetensors_torch SKIP_RETURN_CODE 77 TIMEOUT 120)
  add_test(NAME safetensors_torch_read
           COMMAND ${CMAKE_COMMAND} -E env NOEIRA_SAFETENSORS_TORCH_DIR=${noeira_st_dir}
                   OMP_NUM_THREADS=2
                   $<TARGET_FILE:noeira_tests> --gtest_filter=SafetensorsTorch.ReadsTorchModels)
  # Skipped (never passed) when the writer skipped and left no files.
  set_tests_properties(safetensors_torch_read PROPERTIES
                       FIXTURES_REQUIRED safetensors_torch TIMEOUT 120
                       SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endif()
