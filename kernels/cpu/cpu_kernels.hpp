#pragma once
// Declarations of the CPU backend; kernels/cpu/table.cpp puts them into the KernelTable, which is
// where their contracts are documented.
#include "kernels/kernel_table.hpp"

namespace noeira::cpu {
#include "kernels/backend_kernels.inc"
}  // namespace noeira::cpu
