#include "kernels/cuda/cuda_kernels.hpp"

namespace noeira::cuda {

namespace {
// Every member is filled: designated initializers in declaration order, so a new table entry
// without a CUDA kernel shows up as a -Wmissing-field-initializers warning here.
const KernelTable kTable = {
    .target = Target::Cuda,
    .allocate = allocate,
    .release = release,
    .upload = upload,
    .download = download,
    .copy = copy_bytes,
    .synchronize = synchronize,
    .fill = fill,
    .scale = scale,
    .add = add,
    .accumulate = accumulate,
    .copy_columns = copy_columns,
    .sum_squares = sum_squares,
    .sum = sum,
    .linear_forward = linear_forward,
    .linear_backward = linear_backward,
    .activation_forward = activation_forward,
    .activation_backward = activation_backward,
    .softmax_forward = softmax_forward,
    .softmax_backward = softmax_backward,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .rmsnorm_forward = rmsnorm_forward,
    .rmsnorm_backward = rmsnorm_backward,
    .embedding_forward = embedding_forward,
    .embedding_backward = embedding_backward,
    .dropout_forward = dropout_forward,
    .dropout_backward = dropout_backward,
    .cross_entropy = cross_entropy,
    .soft_cross_entropy = soft_cross_entropy,
    .mse = mse,
    .count_correct = count_correct,
    .sgd_step = sgd_step,
    .adam_step = adam_step,
};
}  // namespace

const KernelTable& table() { return kTable; }

}  // namespace noeira::cuda
