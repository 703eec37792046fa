#pragma once
// Marks functions callable from host and device code, so that one definition of the math serves
// the OpenMP kernels and the CUDA kernels alike.
#if defined(__CUDACC__)
#define NOEIRA_HD __host__ __device__ __forceinline__
#else
#define NOEIRA_HD inline
#endif
