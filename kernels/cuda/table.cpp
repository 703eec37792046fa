#include "kernels/cuda/cuda_kernels.hpp"

namespace noeira::cuda {

namespace {
// Every member is filled: designated initializers in declaration order, so a new table entry
// without a CUDA kernel shows up as a -Wmissing-field-initializers warning here.
const KernelTable kTable = {
    .target = Target::Cuda,
#include "kernels/backend_table.inc"
};
}  // namespace

const KernelTable& table() { return kTable; }

}  // namespace noeira::cuda
