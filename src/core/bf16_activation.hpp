#pragma once
// Activations held in bfloat16 where the leaf allows (--precision bf16): an activation that only
// matrix products read (a LayerNorm's output, a GELU Linear's, each feeding a Linear) is written
// as its bfloat16 bits, half the bytes, and the products read the bits as they are. Bf16 products
// round their fp32 operands to bfloat16 anyway, so the run computes the same numbers bit for bit;
// what changes is the memory those activations hold between the forward and the vjp.
//
// Two sides must agree, and only a composition that holds both knows they do: a consumer whose
// input only products read says so (static input_is_product_operand: Linear, SelfAttention, a
// Sequential whose first child does), and a producer that can write its output as bits offers
// hold_output_in_bf16() (a LayerNorm; a Linear whose activation's derivative reads the
// pre-activation, not the output, so that its own vjp never reads what it wrote). Sequential calls
// it between neighbours, a transformer block for its norms. It acts only where the context runs
// bf16 products and ctx.bf16_activations is set (the trainer's contexts under --precision bf16,
// unless --fp32-activations); anything else keeps fp32 outputs. A module that is not a consumer
// and is handed bits fails on its first read with a dtype error, never reads them as floats.
#include <cstddef>
#include <cstdint>

#include "core/context.hpp"
#include "core/module.hpp"
#include "core/tensor.hpp"

namespace noeira {

template <class M>
concept ReadsInputAsProductOperand = requires { requires M::input_is_product_operand; };

template <class M>
concept CanHoldOutputInBf16 = requires(M& m) { m.hold_output_in_bf16(); };

// How many of a model's modules hold their outputs in bf16 under bf16 products.
template <class M>
std::size_t bf16_activation_sites(M& model) {
  return walk_sites(model, WalkSite::Bf16Output);
}

// Whether a producer told to hold its output in bf16 does so under this context.
inline bool holds_bf16_activations(const Context& ctx) {
  return ctx.bf16_activations && ctx.k->precision == Precision::Bf16;
}

// A producer's output buffer: fp32 values, or their bfloat16 bits where the producer was told to
// hold it so (hold()) and the context holds bf16 activations.
class ProducerOutput {
 public:
  void hold() { told_ = true; }

  // This forward's output, in this shape: the bits or the fp32 buffer, as above.
  Tensor& resize(const Context& ctx, const Shape& shape) {
    bits_ = told_ && holds_bf16_activations(ctx);
    if (!bits_) {
      values_.resize(shape, ctx.target);
      return values_;
    }
    if (bits_buffer_.dtype() != DType::BF16) {
      bits_buffer_ = Tensor(Shape{0}, ctx.target, DType::BF16);
    }
    bits_buffer_.resize(shape, ctx.target);
    return bits_buffer_;
  }

  // Whether the last forward's output is bits (then values() is not it).
  bool bits() const { return bits_; }
  const Tensor& values() const { return values_; }

  // The walk's report of a producer told to hold its output (bf16_activation_sites).
  template <class Visitor>
  void visit(Visitor& visitor) const {
    if (told_) visit_site(visitor, WalkSite::Bf16Output);
  }

 private:
  Tensor values_;
  Tensor bits_buffer_;
  bool told_ = false;  // hold() was called
  bool bits_ = false;  // the last forward wrote bits_buffer_
};

// An activation's storage for the typed kernels: fp32 values or bfloat16 bits.
inline const void* activation_data(const Tensor& t) {
  if (t.dtype() == DType::BF16) return t.as<std::uint16_t>();
  return t.data();
}
inline void* activation_data(Tensor& t) {
  if (t.dtype() == DType::BF16) return t.as<std::uint16_t>();
  return t.data();
}

}  // namespace noeira
