#pragma once
// The MPI backend's handles on started ops (distributed/mpi_process_group.hpp).
//
// Most ops are posted whole when they start: a set of MPI requests, then local work once they
// complete (MpiWork). The rank-order allreduce is two phases (distributed/mpi_ordered_sum.hpp):
// its second phase can only be posted once its first has completed on this rank, by this rank,
// inside some MPI call of ours. Peers block on that second phase, so a rank that waits for any
// other op of the group must keep posting it meanwhile, or two ranks waiting for different ops
// (in a different order, or a broadcast on one rank while the other waits for the allreduce)
// would wait for each other forever. MpiProgress is that duty: the group's ops with a phase
// still to post, advanced by every test() and wait() of the group's Works.
#include <mpi.h>

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "distributed/process_group.hpp"

namespace noeira::dist {

// An op with a later phase to post once its earlier one completes on this rank.
class PhasedOp {
 public:
  virtual ~PhasedOp() = default;
  // Posts the next phase if the current one has completed; never blocks. True once nothing is
  // left to post (the op then leaves MpiProgress).
  virtual bool advance() = 0;
};

class MpiProgress {
 public:
  void add(PhasedOp* op) { pending_.push_back(op); }
  void remove(PhasedOp* op);
  // Advances every pending op once, in the order they started; never blocks. A call made while an
  // op advances (an op that tests its own parts, mpi_node_sums.hpp) returns at once: the outer
  // call is advancing every op already.
  void advance();
  bool idle() const { return pending_.empty(); }

 private:
  std::vector<PhasedOp*> pending_;  // not owned: each op removes itself
  bool advancing_ = false;
};

// One idle look of a rank waiting for its peers: Open MPI moves its own non-blocking ops (a
// broadcast a peer waits for) only inside MPI calls, so it makes one on `comm` that returns at
// once; after a short spin (`looks` so far) the core goes to whoever needs it.
void poll_idle(MPI_Comm comm, int looks);

// Completes every request of `requests` (blocking); while other ops of `progress` still have a
// phase to post it polls instead, advancing them between tests.
void wait_all(std::vector<MPI_Request>& requests, MpiProgress& progress);
// Whether every request has completed, after advancing `progress`; never blocks.
bool test_all(std::vector<MPI_Request>& requests, MpiProgress& progress);

// The handle on an op that a queue of the group moves on from MpiProgress (SharedSums, NodeSums):
// test() and wait() move the whole group on, this op included, until the op's `done` is set.
template <class Op>
class QueuedWork final : public WorkImpl {
 public:
  QueuedWork(std::shared_ptr<Op> op, MpiProgress& progress, MPI_Comm comm)
      : op_(std::move(op)), progress_(progress), comm_(comm) {}

  bool test() override {
    progress_.advance();
    return op_->done;
  }

  void wait() override {
    for (int looks = 0;; ++looks) {
      progress_.advance();
      if (op_->done) return;
      poll_idle(comm_, looks);
    }
  }

 private:
  std::shared_ptr<Op> op_;
  MpiProgress& progress_;
  MPI_Comm comm_;
};

class MpiWork final : public WorkImpl {
 public:
  // on_complete runs once, on the caller's thread, when every request has completed.
  MpiWork(std::vector<MPI_Request> requests, MpiProgress& progress,
          std::function<void()> on_complete = {})
      : requests_(std::move(requests)), progress_(progress), on_complete_(std::move(on_complete)) {}

  bool test() override;
  void wait() override;

 private:
  void complete();

  std::vector<MPI_Request> requests_;
  MpiProgress& progress_;
  std::function<void()> on_complete_;
};

}  // namespace noeira::dist
