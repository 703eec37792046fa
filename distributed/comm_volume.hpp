#pragma once
// Communication volume in ring-equivalent elements: what one rank sends for a collective in the
// bandwidth-optimal ring algorithm. The factors are the ones nccl-tests turns algorithm bandwidth
// into bus bandwidth with. For an op over a whole buffer of S elements on N ranks:
//   allreduce       2·S·(N−1)/N   (a reduce-scatter, then an all-gather)
//   reduce-scatter    S·(N−1)/N   (S = the whole input; the funnel's count is the shard S/N)
//   all-gather        S·(N−1)/N   (S = the whole output; the count is again the shard)
//   broadcast         S           (a pipelined chain: every rank but the last forwards S)
//   barrier           0
//
// docs/design.md's per-step figures in these units, Ψ = parameter count: DDP, ZeRO-1 and ZeRO-2 send
// 2Ψ(N−1)/N per rank per step (allreduce; or reduce-scatter plus all-gather), ZeRO-3 3Ψ(N−1)/N
// (gather for forward, gather for backward, reduce-scatter), so ZeRO-3 = 1.5x DDP. What a policy
// actually sends differs by two known terms (tests/test_dist_comm_volume.cpp pins both): the
// padding of the flat layout is sent too, and ZeRO-3 skips the backward gather of the last unit,
// which is still gathered from its forward.
#include <cstdint>

#include "distributed/policy.hpp"
#include "distributed/process_group.hpp"

namespace noeira::dist {

// f such that one rank sends f·S elements for an op over a whole buffer of S elements.
inline double bus_factor(Collective kind, int ranks) {
  const double n = static_cast<double>(ranks);
  switch (kind) {
    case Collective::AllReduce:
      return 2.0 * (n - 1.0) / n;
    case Collective::ReduceScatter:
    case Collective::AllGather:
      return (n - 1.0) / n;
    case Collective::Broadcast:
      return ranks > 1 ? 1.0 : 0.0;
    case Collective::Barrier:
      return 0.0;
  }
  return 0.0;
}

// Elements one rank sends for ops of `kind` whose per-rank counts add up to `count`
// (CollectiveCall::count: the buffer for allreduce and broadcast, the shard otherwise).
inline double ring_elements(Collective kind, std::int64_t count, int ranks) {
  const bool sharded = kind == Collective::ReduceScatter || kind == Collective::AllGather;
  const double whole = static_cast<double>(count) * (sharded ? ranks : 1);
  return bus_factor(kind, ranks) * whole;
}

// Elements one rank sent for everything in a tally.
inline double ring_elements(const CollectiveTally& tally, int ranks) {
  double sent = 0.0;
  for (std::size_t k = 0; k < kCollectiveKinds; ++k) {
    sent += ring_elements(static_cast<Collective>(k), tally.elements[k], ranks);
  }
  return sent;
}

// docs/design.md's elements sent per rank for one training step (no clipping), Ψ = psi.
inline double formula_step_elements(Policy policy, std::int64_t psi, int ranks) {
  const double per_pass = static_cast<double>(psi) * (ranks - 1.0) / ranks;  // Ψ(N−1)/N
  return (policy == Policy::Zero3 ? 3.0 : 2.0) * per_pass;
}

}  // namespace noeira::dist
