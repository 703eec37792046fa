#include "kernels/cuda/cuda_kernels.hpp"

namespace noeira::cuda {

namespace {
// Every member is filled: designated initializers in declaration order, so a new table entry
// without a CUDA kernel shows up as a -Wmissing-field-initializers warning here.
const KernelTable kTable = {
    .target = Target::Cuda,
#include "kernels/backend_table.inc"
};

// The same kernels, the matrix products with bf16 operands (as the CPU's bf16 table).
const KernelTable kBf16Table = [] {
  KernelTable t = kTable;
  t.precision = Precision::Bf16;
  t.linear_forward = linear_forward_at<Precision::Bf16>;
  t.linear_backward = linear_backward_at<Precision::Bf16>;
  t.batched_matmul = batched_matmul_at<Precision::Bf16>;
  t.conv2d_forward = conv2d_forward_at<Precision::Bf16>;
  t.conv2d_backward_data = conv2d_backward_data_at<Precision::Bf16>;
  t.conv2d_backward_filter = conv2d_backward_filter_at<Precision::Bf16>;
  return t;
}();
}  // namespace

const KernelTable& table() { return kTable; }
const KernelTable& bf16_table() { return kBf16Table; }

}  // namespace noeira::cuda
