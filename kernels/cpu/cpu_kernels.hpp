#pragma once
// Declarations of the CPU backend; kernels/cpu/table.cpp puts them into the KernelTable, which is
// where their contracts are documented.
#include "kernels/kernel_table.hpp"

namespace noeira::cpu {
#include "kernels/backend_kernels.inc"

// The kernels with matrix products, at a precision of their operands (kernels/cpu/gemm.hpp): the
// table's entries above are the Fp32 ones, the bf16 table's (kernels/cpu/table.cpp) the Bf16 ones.
template <Precision P> decltype(linear_forward) linear_forward_at;
template <Precision P> decltype(linear_backward) linear_backward_at;
template <Precision P> decltype(batched_matmul) batched_matmul_at;
template <Precision P> decltype(conv2d_forward) conv2d_forward_at;
template <Precision P> decltype(conv2d_backward_data) conv2d_backward_data_at;
template <Precision P> decltype(conv2d_backward_filter) conv2d_backward_filter_at;
}  // namespace noeira::cpu
