#pragma once
// The one way a GPU test skips where it cannot run: the same words everywhere, which
// benchmarks/gpu_check.sh reads (on a GPU machine a "no CUDA device" skip fails the check).
#include <gtest/gtest.h>

#include <string>

#include "kernels/kernel_table.hpp"

namespace noeira::testing {

// The build's own words (no GPU, no CUDA build, or a CUDA plugin that would not load).
inline std::string no_cuda_reason() { return ::noeira::cuda_unavailable_reason(); }

}  // namespace noeira::testing

#define NOEIRA_REQUIRE_GPU()          \
  if (!::noeira::cuda_available())    \
  GTEST_SKIP() << "no CUDA device: " << ::noeira::testing::no_cuda_reason()
