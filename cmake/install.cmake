# cmake --install: the noeira binary, the per-layer static libraries, their headers (under
# include/noeira, in the tree's layout: core/, nn/, optim/, loss/, train/, kernels/,
# distributed/, io/) and a CMake package, so that an outside project builds against noeira with
#   find_package(noeira 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE noeira::noeira)
# examples/custom_model/ is such a project; the ctest test package_example builds it against an
# install of this tree.
include(CMakePackageConfigHelpers)

set(noeira_layers noeira_kernels noeira_nn noeira_distributed noeira_io noeira_train noeira_cli)
foreach(layer ${noeira_layers})
  string(REPLACE "noeira_" "" layer_name ${layer})
  set_target_properties(${layer} PROPERTIES EXPORT_NAME ${layer_name})  # noeira::nn, ...
  add_library(noeira::${layer_name} ALIAS ${layer})
endforeach()

# The umbrella target, noeira::noeira: every layer, and C++20 for whoever links it (the headers
# need it). Named noeira_library here because the binary is `noeira`.
add_library(noeira_library INTERFACE)
target_link_libraries(noeira_library INTERFACE ${noeira_layers})
target_compile_features(noeira_library INTERFACE cxx_std_20)
# <noeira/noeira.hpp>, the one header a program includes: include/ in the tree, the install's
# include directory once installed (beside include/noeira, the layers' root).
target_include_directories(noeira_library INTERFACE
                           $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(noeira_library PROPERTIES EXPORT_NAME noeira)
add_library(noeira::noeira ALIAS noeira_library)

install(TARGETS ${noeira_layers} noeira_library EXPORT noeiraTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET noeira)
  install(TARGETS noeira RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
# The CUDA plugin, where the binary looks for it: bin/../<libdir> (kernels/cuda_plugin.hpp).
if(TARGET noeira_cuda)
  install(TARGETS noeira_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

foreach(layer_dir core nn optim loss train)
  install(DIRECTORY src/${layer_dir} DESTINATION ${noeira_install_include}
          FILES_MATCHING PATTERN "*.hpp")
endforeach()
# Of the command line, its entry point alone: the rest is CLI11's, private to libnoeira_cli.
install(FILES src/cli/command_line.hpp DESTINATION ${noeira_install_include}/cli)
install(FILES include/noeira/noeira.hpp DESTINATION ${noeira_install_include})
# kernels/ holds .inc tables that its headers include, and .cuh headers for CUDA sources.
install(DIRECTORY kernels distributed io DESTINATION ${noeira_install_include}
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.inc" PATTERN "*.cuh")

set(noeira_package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/noeira)
install(EXPORT noeiraTargets NAMESPACE noeira:: DESTINATION ${noeira_package_dir})
configure_package_config_file(cmake/noeiraConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/noeiraConfig.cmake
                              INSTALL_DESTINATION ${noeira_package_dir})
# 0.x: a minor version may change the interface.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/noeiraConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/noeiraConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/noeiraConfigVersion.cmake
        DESTINATION ${noeira_package_dir})

# `noeira plot` runs scripts/plot_runs.py from share/noeira beside the binary's directory: the
# installed bin/../share/noeira, or <build>/share/noeira in the build tree (copied here, again
# whenever the script changes).
configure_file(scripts/plot_runs.py ${CMAKE_CURRENT_BINARY_DIR}/share/noeira/plot_runs.py COPYONLY)
install(PROGRAMS scripts/plot_runs.py DESTINATION ${CMAKE_INSTALL_DATADIR}/noeira)
