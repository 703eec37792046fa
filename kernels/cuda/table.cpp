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
const KernelTable kBf16Table = with_bf16_products(kTable);
}  // namespace

const KernelTable& table() { return kTable; }
const KernelTable& bf16_table() { return kBf16Table; }

}  // namespace noeira::cuda
