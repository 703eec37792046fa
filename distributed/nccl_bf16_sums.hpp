#pragma once
// The NCCL backend's bf16 sums (process_group.hpp: accumulated in fp32 in rank order, rounded to
// bf16 once). NCCL's own ncclBfloat16 sums add in bf16 at every hop of its rings and trees, so a
// sum over N ranks rounds N−1 times, in an order of NCCL's choosing. These are built from
// point-to-point messages instead, as the MPI backend's (mpi_ordered_sum.hpp): the ranks swap
// raw bf16 chunks (ncclSend / ncclRecv in one group), each rank folds its own chunk in an fp32
// accumulator with the CUDA kernels (from_bf16, then to_bf16), and an allreduce then sends each
// folded chunk to every rank. The same bits as the MPI and simulated backends, and the bytes of
// a ring: (N−1)/N of the input per rank for a reduce-scatter, 2(N−1)/N for an allreduce.
//
// Everything is enqueued on the group's communication stream, in call order, so one scratch
// buffer serves every op; it grows stream-ordered (cudaMallocAsync / cudaFreeAsync).
#ifdef NOEIRA_HAVE_CUDA

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>

#include "distributed/process_group.hpp"

namespace noeira::dist {

class NcclBf16Sums {
 public:
  NcclBf16Sums() = default;
  NcclBf16Sums(const NcclBf16Sums&) = delete;
  NcclBf16Sums& operator=(const NcclBf16Sums&) = delete;

  // call.out = Σ over ranks of call.out (bf16, in place).
  void allreduce(const CollectiveCall& call, ncclComm_t comm, int rank, int size,
                 cudaStream_t stream);
  // call.out = this rank's segment of Σ over ranks of call.in (bf16; in place when out is it).
  void reduce_scatter(const CollectiveCall& call, ncclComm_t comm, int rank, int size,
                      cudaStream_t stream);
  // Frees the scratch once the stream has no op left (the group's teardown). Never throws.
  void release() noexcept;

 private:
  // Room for (size − 1) received chunks of `chunk` elements and an fp32 accumulator of as many.
  char* scratch(std::size_t bytes, cudaStream_t stream);

  char* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
};

}  // namespace noeira::dist

#endif  // NOEIRA_HAVE_CUDA
