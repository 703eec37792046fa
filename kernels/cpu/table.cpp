#include "kernels/cpu/cpu_kernels.hpp"

namespace noeira::cpu {

// Host memory is the CPU target's live memory: upload and download are plain copies.
extern const KernelTable table = {
    .target = Target::Cpu,
#include "kernels/backend_table.inc"
};

// The same kernels, the matrix products with bf16 operands.
extern const KernelTable bf16_table = [] {
  KernelTable t = table;
  t.precision = Precision::Bf16;
  t.linear_forward = linear_forward_at<Precision::Bf16>;
  t.linear_backward = linear_backward_at<Precision::Bf16>;
  t.batched_matmul = batched_matmul_at<Precision::Bf16>;
  t.conv2d_forward = conv2d_forward_at<Precision::Bf16>;
  t.conv2d_backward_data = conv2d_backward_data_at<Precision::Bf16>;
  t.conv2d_backward_filter = conv2d_backward_filter_at<Precision::Bf16>;
  return t;
}();

}  // namespace noeira::cpu
