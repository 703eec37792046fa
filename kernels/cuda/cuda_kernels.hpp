#pragma once
// Declarations of the CUDA backend; kernels/cuda/table.cpp puts them into the KernelTable, which is
// where their contracts are documented. Host-only: the CPU compiler can include it.
#include "kernels/kernel_table.hpp"

namespace noeira::cuda {

void* allocate(std::size_t bytes);
void release(void* ptr);
void upload(Stream, void* dst, const void* host_src, std::size_t bytes);
void download(Stream, void* host_dst, const void* src, std::size_t bytes);
void copy_bytes(Stream, void* dst, const void* src, std::size_t bytes);
void synchronize(Stream);

void fill(Stream, float* x, float value, std::int64_t n);
void scale(Stream, float* x, float factor, std::int64_t n);
void add(Stream, float* y, const float* a, const float* b, std::int64_t n);
void accumulate(Stream, float* y, const float* x, std::int64_t n);
void copy_columns(Stream, GradMode, float* dst, std::int64_t dst_stride, const float* src,
                  std::int64_t src_stride, std::int64_t rows, std::int64_t cols);

double sum_squares(Stream, const float* x, std::int64_t n);
double sum(Stream, const float* x, std::int64_t n);

void linear_forward(Stream, Activation act, float* y, float* pre, const float* x, const float* w,
                    const float* b, std::int64_t rows, std::int64_t in, std::int64_t out);
void linear_backward(Stream, Activation act, GradMode mode, float* dx, float* dw, float* db,
                     float* dpre, const float* dy, const float* x, const float* w, const float* y,
                     const float* pre, std::int64_t rows, std::int64_t in, std::int64_t out);

void activation_forward(Stream, Activation act, float* y, const float* x, std::int64_t n);
void activation_backward(Stream, Activation act, float* dx, const float* dy, const float* x,
                         const float* y, std::int64_t n);

void softmax_forward(Stream, float* y, const float* x, std::int64_t rows, std::int64_t cols);
void softmax_backward(Stream, float* dx, const float* dy, const float* y, std::int64_t rows,
                      std::int64_t cols);

void layernorm_forward(Stream, float* y, float* mean, float* rstd, const float* x,
                       const float* gamma, const float* beta, std::int64_t rows,
                       std::int64_t cols, float eps);
void layernorm_backward(Stream, GradMode mode, float* dx, float* dgamma, float* dbeta,
                        const float* dy, const float* x, const float* gamma, const float* mean,
                        const float* rstd, std::int64_t rows, std::int64_t cols);
void rmsnorm_forward(Stream, float* y, float* rstd, const float* x, const float* gamma,
                     std::int64_t rows, std::int64_t cols, float eps);
void rmsnorm_backward(Stream, GradMode mode, float* dx, float* dgamma, const float* dy,
                      const float* x, const float* gamma, const float* rstd, std::int64_t rows,
                      std::int64_t cols);

void embedding_forward(Stream, float* y, const std::int32_t* ids, const float* table,
                       std::int64_t rows, std::int64_t dim);
void embedding_backward(Stream, GradMode mode, float* dtable, const float* dy,
                        const std::int32_t* ids, std::int64_t rows, std::int64_t dim,
                        std::int64_t vocab);

void dropout_forward(Stream, float* y, const float* x, DropoutKey key, float p, std::int64_t rows,
                     std::int64_t cols);
void dropout_backward(Stream, float* dx, const float* dy, DropoutKey key, float p,
                      std::int64_t rows, std::int64_t cols);

void cross_entropy(Stream, float* row_loss, float* dlogits, const float* logits,
                   const std::int32_t* labels, std::int64_t rows, std::int64_t classes,
                   float grad_scale);
void soft_cross_entropy(Stream, float* row_loss, float* dlogits, const float* logits,
                        const float* target_probs, std::int64_t rows, std::int64_t classes,
                        float grad_scale);
void mse(Stream, float* row_loss, float* dpred, const float* pred, const float* target,
         std::int64_t rows, std::int64_t cols, float grad_scale);
std::int64_t count_correct(Stream, const float* logits, const std::int32_t* labels,
                           std::int64_t rows, std::int64_t classes);

void sgd_step(Stream, float* w, float* momentum, const float* g, std::int64_t n, SgdHyper hyper);
void adam_step(Stream, float* w, float* m, float* v, const float* g, std::int64_t n,
               AdamHyper hyper);

}  // namespace noeira::cuda
