#pragma once
// Enums shared by every kernel backend. Kernels know nothing of modules, tensors or ranks:
// they see raw pointers, element counts and these enums.
#include <cstdint>
#include <string_view>

namespace noeira {

// Where a tensor's live storage is and which kernels run on it.
enum class Target : std::uint8_t { Cpu, Cuda };

// Element types. F32 carries parameters and activations; I32 token ids and labels; F64 and I64
// host-side scalars (loss sums, counters) in collectives and device accumulators; BF16 is
// reserved so that storage code already sizes elements by dtype.
enum class DType : std::uint8_t { F32, I32, BF16, F64, I64 };

// The activation fused after a Linear, or applied on its own by an activation leaf.
// PyTorch's functions of the same names: ELU with alpha 1, HardSwish x·relu6(x + 3)/6, Mish
// x·tanh(softplus(x)), Softplus log(1 + e^x) with beta 1 and threshold 20 (x itself above 20).
enum class Activation : std::uint8_t {
  Identity, ReLU, Tanh, Sigmoid, GeluTanh, GeluErf, SiLU, Elu, HardSwish, Mish, Softplus
};

// The precision of the operands of the matrix products (Linear, attention's batched products,
// convolutions): Fp32, or Bf16 — each operand rounded to bfloat16 (round to nearest even), the
// products accumulated in fp32 into fp32 results (--precision bf16, PyTorch's autocast). Every
// other kernel (normalizations, softmax, losses, optimizers, element-wise) computes in fp32 at
// either precision.
enum class Precision : std::uint8_t { Fp32, Bf16 };

// Whether a parameter-gradient kernel overwrites its accumulator or adds to it.
enum class GradMode : std::uint8_t { Overwrite, Accumulate };

// An opaque execution stream: a cudaStream_t on CUDA, ignored on the CPU.
using Stream = void*;

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::I32: return 4;
    case DType::BF16: return 2;
    case DType::F64: return 8;
    case DType::I64: return 8;
  }
  return 0;
}

constexpr std::string_view to_string(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::I32: return "i32";
    case DType::BF16: return "bf16";
    case DType::F64: return "f64";
    case DType::I64: return "i64";
  }
  return "?";
}

// The DType of a C++ element type: dtype_of<float> == DType::F32 (no other type compiles).
template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> { static constexpr DType value = DType::F32; };
template <>
struct DTypeOf<std::int32_t> { static constexpr DType value = DType::I32; };
template <>
struct DTypeOf<double> { static constexpr DType value = DType::F64; };
template <>
struct DTypeOf<std::int64_t> { static constexpr DType value = DType::I64; };
// bfloat16 values travel as their bits (kernels/bf16_math.hpp); no integer sums are made in 16 bits.
template <>
struct DTypeOf<std::uint16_t> { static constexpr DType value = DType::BF16; };
template <class T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

constexpr std::string_view to_string(Precision p) { return p == Precision::Fp32 ? "fp32" : "bf16"; }

constexpr std::string_view to_string(Target t) { return t == Target::Cpu ? "cpu" : "cuda"; }

constexpr std::string_view to_string(Activation a) {
  switch (a) {
    case Activation::Identity: return "identity";
    case Activation::ReLU: return "relu";
    case Activation::Tanh: return "tanh";
    case Activation::Sigmoid: return "sigmoid";
    case Activation::GeluTanh: return "gelu_tanh";
    case Activation::GeluErf: return "gelu";
    case Activation::SiLU: return "silu";
    case Activation::Elu: return "elu";
    case Activation::HardSwish: return "hardswish";
    case Activation::Mish: return "mish";
    case Activation::Softplus: return "softplus";
  }
  return "?";
}

// True when the derivative of the activation needs its input (pre-activation), not only its output.
constexpr bool activation_needs_input(Activation a) {
  return a == Activation::GeluTanh || a == Activation::GeluErf || a == Activation::SiLU ||
         a == Activation::HardSwish || a == Activation::Mish || a == Activation::Softplus;
}

}  // namespace noeira
