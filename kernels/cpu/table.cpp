#include "kernels/cpu/cpu_kernels.hpp"

namespace noeira::cpu {

// Host memory is the CPU target's live memory: upload and download are plain copies.
extern const KernelTable table = {
    .target = Target::Cpu,
    .allocate = allocate,
    .release = release,
    .upload = copy_bytes,
    .download = copy_bytes,
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

}  // namespace noeira::cpu
