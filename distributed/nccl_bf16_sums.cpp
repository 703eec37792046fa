// See nccl_bf16_sums.hpp. Built into the CUDA plugin with the NCCL backend.
#ifdef NOEIRA_HAVE_CUDA

#include "distributed/nccl_bf16_sums.hpp"

#include <cstdint>
#include <vector>

#include "distributed/nccl_check.hpp"
#include "distributed/shard.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"

namespace noeira::dist {

namespace {

using Bits = std::uint16_t;

constexpr std::size_t kAlign = 256;

std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Posts, in one NCCL group, this rank's side of an all-to-all over `total` elements of `send`
// cut by even_part: part q goes to peer q, every peer's part `rank` comes into `slots` (peer
// order, this rank left out). Returns, per rank q, where q's part `rank` is: the fold's sources.
std::vector<const Bits*> exchange(ncclComm_t comm, cudaStream_t stream, int rank, int size,
                                  const Bits* send, std::int64_t total, Bits* slots) {
  const Range mine = even_part(total, size, rank);
  std::vector<const Bits*> sources(static_cast<std::size_t>(size));
  sources[static_cast<std::size_t>(rank)] = send + mine.begin;
  in_nccl_group([&] {
    for (int q = 0; q < size; ++q) {
      if (q == rank) continue;
      Bits* slot = slots + static_cast<std::int64_t>(q - (q > rank ? 1 : 0)) * mine.size();
      sources[static_cast<std::size_t>(q)] = slot;
      const Range theirs = even_part(total, size, q);
      if (!mine.empty()) {
        NCCL_CHECK(ncclRecv(slot, static_cast<std::size_t>(mine.size()), ncclBfloat16, q, comm,
                            stream));
      }
      if (!theirs.empty()) {
        NCCL_CHECK(ncclSend(send + theirs.begin, static_cast<std::size_t>(theirs.size()),
                            ncclBfloat16, q, comm, stream));
      }
    }
  });
  return sources;
}

// out = bf16(((fp32(sources[0]) + fp32(sources[1])) + ...)), through the fp32 accumulator: the
// left fold of mpi_ordered_sum.cpp, element by element, in the same order.
void fold(cudaStream_t stream, Bits* out, const std::vector<const Bits*>& sources, float* acc,
          std::int64_t n) {
  if (n == 0) return;
  cuda::from_bf16(stream, GradMode::Overwrite, acc, sources[0], n);
  for (std::size_t q = 1; q < sources.size(); ++q) {
    cuda::from_bf16(stream, GradMode::Accumulate, acc, sources[q], n);
  }
  cuda::to_bf16(stream, out, acc, n);
}

}  // namespace

char* NcclBf16Sums::scratch(std::size_t bytes, cudaStream_t stream) {
  if (bytes > scratch_bytes_) {
    if (scratch_ != nullptr) CUDA_CHECK(cudaFreeAsync(scratch_, stream));
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&scratch_), bytes, stream));
    scratch_bytes_ = bytes;
  }
  return scratch_;
}

void NcclBf16Sums::release() noexcept {
  if (scratch_ != nullptr) (void)cudaFree(scratch_);
  scratch_ = nullptr;
  scratch_bytes_ = 0;
}

void NcclBf16Sums::reduce_scatter(const CollectiveCall& call, ncclComm_t comm, int rank, int size,
                                  cudaStream_t stream) {
  const std::int64_t n = call.count;
  const std::size_t slot_bytes = aligned(static_cast<std::size_t>(n * (size - 1)) * sizeof(Bits));
  char* room = scratch(slot_bytes + static_cast<std::size_t>(n) * sizeof(float), stream);
  // in.count is n · size, so even_part's parts are the segments.
  const std::vector<const Bits*> sources =
      exchange(comm, stream, rank, size, static_cast<const Bits*>(call.in.data),
               static_cast<std::int64_t>(call.in.count), reinterpret_cast<Bits*>(room));
  fold(stream, static_cast<Bits*>(call.out.data), sources,
       reinterpret_cast<float*>(room + slot_bytes), n);
}

void NcclBf16Sums::allreduce(const CollectiveCall& call, ncclComm_t comm, int rank, int size,
                             cudaStream_t stream) {
  Bits* buf = static_cast<Bits*>(call.out.data);
  const std::int64_t total = call.count;
  const Range mine = even_part(total, size, rank);
  const std::size_t slot_bytes =
      aligned(static_cast<std::size_t>(mine.size() * (size - 1)) * sizeof(Bits));
  char* room = scratch(slot_bytes + static_cast<std::size_t>(mine.size()) * sizeof(float), stream);
  const std::vector<const Bits*> sources =
      exchange(comm, stream, rank, size, buf, total, reinterpret_cast<Bits*>(room));
  fold(stream, buf + mine.begin, sources, reinterpret_cast<float*>(room + slot_bytes),
       mine.size());
  // Every rank's folded part to every rank.
  in_nccl_group([&] {
    for (int q = 0; q < size; ++q) {
      if (q == rank) continue;
      const Range theirs = even_part(total, size, q);
      if (!theirs.empty()) {
        NCCL_CHECK(ncclRecv(buf + theirs.begin, static_cast<std::size_t>(theirs.size()),
                            ncclBfloat16, q, comm, stream));
      }
      if (!mine.empty()) {
        NCCL_CHECK(ncclSend(buf + mine.begin, static_cast<std::size_t>(mine.size()),
                            ncclBfloat16, q, comm, stream));
      }
    }
  });
}

}  // namespace noeira::dist

#endif  // NOEIRA_HAVE_CUDA
