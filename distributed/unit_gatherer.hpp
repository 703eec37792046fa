#pragma once
// ZeRO-3's gathers: a unit's full values, all-gathered from every rank's slice into one of the
// store's gather buffers (distributed/param_store.hpp) before the unit's forward and vjp, and,
// with two buffers, the prefetch of the unit expected next (FSDP's forward and backward
// prefetch): while unit u computes from one buffer, the gather of u+1 (forward) or u−1
// (backward), skipping units held whole, is in flight into the other.
//
// What each hook gathers (the comm tally pins it, tests/test_dist_comm_volume.cpp): a unit is
// gathered for its forward and for its vjp unless a buffer still holds it. With one buffer that
// spares the last unit's gather for its vjp (forward, loss, vjp); with two, the last two units'
// in backward, and under accumulation the first two units' forward after the previous
// micro-batch's backward. Prefetching never gathers a unit more often than that, so it changes
// no bit and no volume, only when the gathers happen.
//
// The prediction is only a guess: every rank makes the same one (the hooks run in the same order
// on every rank), and a unit that arrives out of the predicted order waits for the gather in
// flight and is gathered then, correct and merely not overlapped. At most one gather is in
// flight; settle() completes it, and the policy settles before anything writes the slices a
// gather reads (the optimizer step, a checkpoint load).
//
// Under mixed precision (param_store.hpp) the same hooks fill the gather buffers with fp32 words
// holding the unit's bf16 compute values: all-gathered in bf16 and expanded when the gather
// settles (ZeRO-3: half the bytes on the wire), or expanded from the rank's whole bf16 copy with
// nothing to communicate (DDP, ZeRO-1/2: one buffer, no prefetch).
#include <cstddef>
#include <optional>

#include "distributed/param_store.hpp"
#include "distributed/process_group.hpp"

namespace noeira::dist {

enum class PassDirection : std::uint8_t { Forward, Backward };

class UnitGatherer {
 public:
  UnitGatherer(ParamStore& store, ProcessGroup& group);
  ~UnitGatherer();
  UnitGatherer(const UnitGatherer&) = delete;
  UnitGatherer& operator=(const UnitGatherer&) = delete;

  // Unit u's values whole in a gather buffer and its handles bound (a unit held whole: only
  // bound); then, with two buffers, the next unit's gather in `direction` started.
  void acquire(std::size_t unit, PassDirection direction);
  // Completes the gather in flight, if any.
  void settle();

  // Seconds this rank spent blocked on gathers since construction: the gathers that prefetch
  // did not hide.
  double wait_seconds() const { return wait_seconds_; }

 private:
  // The next unit in `direction` that is gathered (not held whole), or ParamStore::kNone.
  std::size_t next_gathered(std::size_t unit, PassDirection direction) const;
  // Starts the gather of `unit` into gather buffer `buffer`.
  void start(std::size_t unit, std::size_t buffer);

  ParamStore& store_;
  ProcessGroup& group_;
  std::optional<Work> in_flight_;
  std::size_t in_flight_unit_ = ParamStore::kNone;
  std::size_t in_flight_buffer_ = ParamStore::kNone;
  std::size_t current_buffer_ = 0;  // the buffer of the unit acquired last
  double wait_seconds_ = 0.0;
};

}  // namespace noeira::dist
