#pragma once
// Product operands rounded to bfloat16 values held in fp32 (into stream-ordered scratch), which
// fp32 (and TF32) represent exactly: an fp32 product then multiplies them exactly and adds in
// fp32, the products of the CPU's bf16 table. cuDNN's convolutions take their operands this way
// under --precision bf16 (cuDNN has no convolution with bfloat16 inputs and an fp32 output); the
// GEMMs take real bfloat16 copies through cuBLASLt, and this form only where cuBLASLt has no bf16
// kernel for them (kernels/cuda/matmul.hpp).
#include <cstdint>
#include <optional>

#include "kernels/cuda/scratch.hpp"
#include "kernels/target.hpp"

namespace noeira::cuda {

// y[i] = x[i] rounded to the nearest bfloat16 (kernels/bf16_math.hpp), as an fp32 value.
void round_to_bf16_values(Stream s, float* y, const float* x, std::int64_t n);

// `count` values as a product at precision P reads them: themselves at Fp32, a rounded copy
// (alive as long as this object, freed in stream order) at Bf16.
template <Precision P>
class ProductOperand {
 public:
  ProductOperand(Stream s, const float* values, std::int64_t count) : data_(values) {
    if constexpr (P == Precision::Bf16) {
      rounded_.emplace(s, static_cast<std::size_t>(count));
      round_to_bf16_values(s, rounded_->data(), values, count);
      data_ = rounded_->data();
    }
  }
  ProductOperand(const ProductOperand&) = delete;
  ProductOperand& operator=(const ProductOperand&) = delete;

  const float* get() const { return data_; }

 private:
  const float* data_;
  std::optional<Scratch<float>> rounded_;
};

}  // namespace noeira::cuda
