#pragma once
// Declarations of the CUDA backend; kernels/cuda/table.cpp puts them into the KernelTable, which is
// where their contracts are documented. Host-only: the CPU compiler can include it.
#include "kernels/kernel_table.hpp"

namespace noeira::cuda {
#include "kernels/backend_kernels.inc"
}  // namespace noeira::cuda
