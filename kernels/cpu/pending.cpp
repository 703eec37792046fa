// TEMPORARY (removed before this work lands): kernels whose implementation is in progress.
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/error.hpp"

namespace noeira::cpu {
#define PENDING throw Error(std::string("kernel not implemented yet: ") + __func__)
void softmax_forward(Stream, float*, const float*, std::int64_t, std::int64_t) { PENDING; }
void softmax_backward(Stream, float*, const float*, const float*, std::int64_t, std::int64_t) { PENDING; }
void layernorm_forward(Stream, float*, float*, float*, const float*, const float*, const float*, std::int64_t, std::int64_t, float) { PENDING; }
void layernorm_backward(Stream, GradMode, float*, float*, float*, const float*, const float*, const float*, const float*, const float*, std::int64_t, std::int64_t) { PENDING; }
void rmsnorm_forward(Stream, float*, float*, const float*, const float*, std::int64_t, std::int64_t, float) { PENDING; }
void rmsnorm_backward(Stream, GradMode, float*, float*, const float*, const float*, const float*, const float*, std::int64_t, std::int64_t) { PENDING; }
void embedding_forward(Stream, float*, const std::int32_t*, const float*, std::int64_t, std::int64_t) { PENDING; }
void embedding_backward(Stream, GradMode, float*, const float*, const std::int32_t*, std::int64_t, std::int64_t, std::int64_t) { PENDING; }
void dropout_forward(Stream, float*, const float*, DropoutKey, float, std::int64_t, std::int64_t) { PENDING; }
void dropout_backward(Stream, float*, const float*, DropoutKey, float, std::int64_t, std::int64_t) { PENDING; }
void cross_entropy(Stream, float*, float*, const float*, const std::int32_t*, std::int64_t, std::int64_t, float) { PENDING; }
void soft_cross_entropy(Stream, float*, float*, const float*, const float*, std::int64_t, std::int64_t, float) { PENDING; }
void mse(Stream, float*, float*, const float*, const float*, std::int64_t, std::int64_t, float) { PENDING; }
std::int64_t count_correct(Stream, const float*, const std::int32_t*, std::int64_t, std::int64_t) { PENDING; }
void sgd_step(Stream, float*, float*, const float*, std::int64_t, SgdHyper) { PENDING; }
void adam_step(Stream, float*, float*, float*, const float*, std::int64_t, AdamHyper) { PENDING; }
}  // namespace noeira::cpu
