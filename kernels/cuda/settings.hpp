#pragma once
// Numerics switches of the CUDA backend. Host-only, so the CPU compiler can include it.
namespace noeira::cuda {

// TF32 tensor-core GEMMs (10-bit mantissa inputs) are off by default: the CUDA results must match
// the fp32 CPU reference within fp32 tolerance. A run may opt in for speed; it applies to GEMMs
// launched afterwards from any thread.
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace noeira::cuda
