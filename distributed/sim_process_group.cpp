#include "distributed/sim_process_group.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/tensor.hpp"
#include "distributed/node_layout.hpp"
#include "distributed/watchdog.hpp"
#include "kernels/error.hpp"
#include "kernels/kernel_table.hpp"

namespace noeira::dist {

namespace {

// One collective as the ranks arrive at it, keyed by sequence number.
struct Slot {
  Collective kind;
  std::int64_t count;
  int root;
  DType dtype;
  int first_rank;  // whose call defines kind, count, root and dtype for the mismatch check
  int arrivals = 0;
  std::vector<bool> arrived;     // [ranks]
  std::vector<const char*> in;   // [ranks] byte addresses of each rank's buffers
  std::vector<char*> out;        // [ranks]
  bool done = false;
};

class SimWorld {
 public:
  SimWorld(NodeLayout layout, Target target)
      : ranks_(layout.ranks()),
        layout_(std::move(layout)),
        k_(kernels_for(target)),
        watchdog_(
            std::make_shared<Watchdog>([this](const CollectiveRecord& r) { on_timeout(r); })) {}

  int ranks() const { return ranks_; }
  const NodeLayout& layout() const { return layout_; }
  Target target() const { return k_.target; }
  const std::shared_ptr<Watchdog>& watchdog() const { return watchdog_; }

  // Records rank's arrival at call.seq; the last rank to arrive performs the collective.
  std::shared_ptr<Slot> arrive(int rank, const CollectiveCall& call) {
    std::lock_guard lk(mu_);
    throw_if_aborted();
    std::shared_ptr<Slot>& slot = slots_[call.seq];
    if (!slot) {
      slot = std::make_shared<Slot>(Slot{call.kind, call.count, call.root, call.out.dtype, rank, 0,
                                         std::vector<bool>(ranks_, false),
                                         std::vector<const char*>(ranks_, nullptr),
                                         std::vector<char*>(ranks_, nullptr), false});
    } else if (slot->kind != call.kind || slot->count != call.count || slot->root != call.root ||
               slot->dtype != call.out.dtype) {
      const std::string reason = detail::concat(
          "collective mismatch at #", call.seq, ": rank ", slot->first_rank, " entered ",
          entered(slot->kind, slot->count, slot->root, slot->dtype), ", rank ", rank, " entered ",
          entered(call.kind, call.count, call.root, call.out.dtype));
      abort_locked(reason, -1);
      throw Error(reason);
    }
    std::shared_ptr<Slot> mine = slot;  // `slot` dangles once erased below
    mine->arrived[static_cast<std::size_t>(rank)] = true;
    mine->in[static_cast<std::size_t>(rank)] = call.in.bytes_begin();
    mine->out[static_cast<std::size_t>(rank)] = static_cast<char*>(call.out.data);
    if (++mine->arrivals == ranks_) {
      // Under the lock: an abort cannot interleave with the writes into the ranks' buffers.
      try {
        perform(*mine);
      } catch (const std::exception& e) {
        // The peers sleep on this slot: fail them now, naming the cause, not at the watchdog's
        // timeout (a rank that catches this error and goes on would leave them there).
        abort_locked(detail::concat("simulated world aborted: collective #", call.seq,
                                    " failed on rank ", rank, ": ", e.what()),
                     rank);
        throw;
      }
      mine->done = true;
      slots_.erase(call.seq);
      cv_.notify_all();
    }
    return mine;
  }

  bool test(const Slot& slot) {
    std::lock_guard lk(mu_);
    if (slot.done) return true;
    throw_if_aborted();
    return false;
  }

  void wait(const Slot& slot) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return slot.done || aborted_; });
    if (!slot.done) throw_if_aborted();
  }

  // Fails every waiting and future collective with `reason`. The first abort wins. origin_rank
  // is the rank whose failure caused it (-1 for a watchdog timeout or a mismatch).
  void abort(const std::string& reason, int origin_rank) {
    std::lock_guard lk(mu_);
    abort_locked(reason, origin_rank);
  }

  int origin_rank() const {
    std::lock_guard lk(mu_);
    return origin_rank_;
  }

 private:
  static std::string entered(Collective kind, std::int64_t count, int root, DType dtype) {
    std::string s =
        detail::concat(to_string(kind), " of ", count, " elements (", to_string(dtype), ")");
    if (kind == Collective::Broadcast) s += detail::concat(" from root ", root);
    return s;
  }

  void throw_if_aborted() const {
    if (aborted_) throw Error(reason_);
  }

  void abort_locked(const std::string& reason, int origin_rank) {
    if (aborted_) return;
    aborted_ = true;
    reason_ = reason;
    origin_rank_ = origin_rank;
    cv_.notify_all();
  }

  void on_timeout(const CollectiveRecord& record) {
    std::lock_guard lk(mu_);
    auto it = slots_.find(record.seq);
    // Completed but not yet waited for, or the world already failed: nothing hangs.
    if (aborted_ || it == slots_.end()) return;
    std::vector<int> missing;
    for (int r = 0; r < ranks_; ++r) {
      if (!it->second->arrived[static_cast<std::size_t>(r)]) missing.push_back(r);
    }
    abort_locked(timeout_message(record, missing), -1);
  }

  // The fixed reduction order (node_layout.hpp): on one node acc = in[0]; acc += in[1]; ...; on
  // several, each later node's ranks so into `part`, which is then added to acc. In the buffers'
  // type (bf16: in fp32), element by element, through the target's kernels (on the stream every
  // rank uses: see the header).
  void perform(Slot& s) {
    const std::int64_t n = s.count;
    const std::size_t elem = dtype_size(s.dtype);
    const auto ranks = static_cast<std::size_t>(ranks_);
    const std::size_t n_bytes = static_cast<std::size_t>(n) * elem;
    auto copy = [&](char* dst, const char* src, std::size_t bytes) {
      if (dst != src) k_.copy(nullptr, dst, src, bytes);
    };
    switch (s.kind) {
      case Collective::AllReduce:
      case Collective::ReduceScatter: {
        if (ranks == 1) {  // the sum of one rank is its input, in any dtype: no scratch pass
          copy(s.out[0], s.in[0], n_bytes);
          break;
        }
        // Every rank's input is summed into scratch first, so outputs never feed inputs.
        const std::int64_t total = s.kind == Collective::AllReduce ? n : n * ranks_;
        const std::size_t total_bytes = static_cast<std::size_t>(total) * elem;
        if (s.dtype == DType::BF16) {
          perform_bf16_sum(s, total);
          break;
        }
        const auto words = static_cast<std::int64_t>((total_bytes + 3) / 4);
        // A second buffer for the later nodes' sums only where there are some.
        char* acc = reinterpret_cast<char*>(scratch_words(layout_.nodes() > 1 ? 2 * words : words));
        char* part = acc + words * 4;
        const std::vector<std::vector<int>>& nodes = layout_.members();
        for (std::size_t k = 0; k < nodes.size(); ++k) {
          char* into = k == 0 ? acc : part;
          copy(into, s.in[static_cast<std::size_t>(nodes[k][0])], total_bytes);
          for (std::size_t m = 1; m < nodes[k].size(); ++m) {
            k_.accumulate_typed(nullptr, s.dtype, into,
                                s.in[static_cast<std::size_t>(nodes[k][m])], total);
          }
          if (k > 0) k_.accumulate_typed(nullptr, s.dtype, acc, part, total);
        }
        for (std::size_t r = 0; r < ranks; ++r) {
          const std::size_t at = s.kind == Collective::AllReduce ? 0 : r * n_bytes;
          copy(s.out[r], acc + at, n_bytes);
        }
        break;
      }
      case Collective::AllGather:
        for (std::size_t r = 0; r < ranks; ++r) {
          for (std::size_t q = 0; q < ranks; ++q) {
            copy(s.out[r] + q * n_bytes, s.in[q], n_bytes);  // in place: a no-op
          }
        }
        break;
      case Collective::Broadcast: {
        const char* src = s.in[static_cast<std::size_t>(s.root)];
        for (std::size_t r = 0; r < ranks; ++r) copy(s.out[r], src, n_bytes);
        break;
      }
      case Collective::Barrier:
        break;
    }
  }

  // Raw target memory, not a Tensor: a tensor's bytes count to the thread that allocates it
  // (core/tensor.hpp), and this buffer would count to whichever rank happened to arrive last, so
  // that rank's --report-memory step peak held it and a real run's (whose sums need no such
  // buffer) did not.
  float* scratch_words(std::int64_t words) {
    const auto bytes = static_cast<std::size_t>(words) * sizeof(float);
    if (scratch_bytes_ < bytes) {
      // The old buffer goes first (a lower peak); if the new one cannot be had, none is held.
      scratch_.reset();
      scratch_bytes_ = 0;
      scratch_ = {static_cast<float*>(k_.allocate(bytes)), ScratchRelease{&k_}};
      scratch_bytes_ = bytes;
    }
    return scratch_.get();
  }

  // A bf16 sum of `total` elements per rank: accumulated in fp32 scratch, rank by rank, rounded
  // once into each rank's output (process_group.hpp).
  void perform_bf16_sum(const Slot& s, std::int64_t total) {
    float* acc = scratch_words(layout_.nodes() > 1 ? 2 * total : total);
    float* part = acc + total;
    auto bits = [](const char* p) { return reinterpret_cast<const std::uint16_t*>(p); };
    const std::vector<std::vector<int>>& nodes = layout_.members();
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      float* into = k == 0 ? acc : part;
      for (std::size_t m = 0; m < nodes[k].size(); ++m) {
        k_.from_bf16(nullptr, m == 0 ? GradMode::Overwrite : GradMode::Accumulate, into,
                     bits(s.in[static_cast<std::size_t>(nodes[k][m])]), total);
      }
      if (k > 0) k_.accumulate_typed(nullptr, DType::F32, acc, part, total);
    }
    for (std::size_t r = 0; r < s.out.size(); ++r) {
      const std::int64_t at = s.kind == Collective::AllReduce ? 0 : static_cast<std::int64_t>(r) * s.count;
      k_.to_bf16(nullptr, reinterpret_cast<std::uint16_t*>(s.out[r]), acc + at, s.count);
    }
  }

  const int ranks_;
  const NodeLayout layout_;
  const KernelTable& k_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint64_t, std::shared_ptr<Slot>> slots_;
  struct ScratchRelease {
    const KernelTable* k;
    void operator()(float* p) const { k->release(p); }
  };
  std::unique_ptr<float, ScratchRelease> scratch_{nullptr, ScratchRelease{nullptr}};
  std::size_t scratch_bytes_ = 0;  // on the target; grows to the largest reduction
  bool aborted_ = false;
  std::string reason_;
  int origin_rank_ = -1;
  // Last member: its thread calls on_timeout, so it must stop before the rest is destroyed.
  std::shared_ptr<Watchdog> watchdog_;
};

class SimWork final : public WorkImpl {
 public:
  SimWork(SimWorld& world, std::shared_ptr<Slot> slot, int rank, std::string name)
      : world_(world), slot_(std::move(slot)), rank_(rank), name_(std::move(name)) {}

  bool test() override { return world_.test(*slot_); }
  void wait() override { world_.wait(*slot_); }
  void abandon() noexcept override {
    world_.abort(detail::concat("rank ", rank_, " failed with ", name_, " in flight"), rank_);
  }

 private:
  SimWorld& world_;
  std::shared_ptr<Slot> slot_;
  int rank_;
  std::string name_;
};

class SimProcessGroup final : public ProcessGroup {
 public:
  SimProcessGroup(SimWorld& world, int rank, const ProcessGroupOptions& options)
      : ProcessGroup(rank, world.ranks(), options, world.watchdog()), world_(world) {}

  std::string_view backend() const override { return "simulated"; }
  std::string nodes() const override { return world_.layout().several_nodes(); }
  Target buffer_target() const override { return world_.target(); }

 protected:
  std::unique_ptr<WorkImpl> start(const CollectiveCall& call) override {
    return std::make_unique<SimWork>(world_, world_.arrive(rank(), call), rank(),
                                     describe(call.kind, call.seq, rank(), size()));
  }

 private:
  SimWorld& world_;
};

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace

NodeLayout simulated_nodes(int ranks, int ranks_per_node) {
  return ranks_per_node > 0 ? NodeLayout::blocks(ranks, ranks_per_node)
                            : NodeLayout::one_node(ranks);
}

void run_simulated(int ranks, const std::function<void(ProcessGroup&)>& body,
                   const ProcessGroupOptions& options, Target target, int ranks_per_node) {
  if (ranks < 1) throw InputError(detail::concat("--sim-ranks must be >= 1, got ", ranks));
  if (ranks_per_node < 0 || ranks_per_node > ranks) {
    throw InputError(detail::concat("--sim-ranks-per-node must be in [1, --sim-ranks ", ranks,
                                    "], got ", ranks_per_node));
  }
  SimWorld world(simulated_nodes(ranks, ranks_per_node), target);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  auto run_rank = [&](int r) {
    try {
      SimProcessGroup group(world, r, options);
      body(group);
    } catch (...) {
      errors[static_cast<std::size_t>(r)] = std::current_exception();
      world.abort(detail::concat("simulated world aborted: rank ", r,
                                 " failed: ", what_of(errors[static_cast<std::size_t>(r)])),
                  r);
    }
  };
  // Rank 0 runs on the calling thread, the others on threads of their own. A one-rank run then
  // has no second thread at all, and its OpenMP team is the caller's: a second team beside the
  // caller's idle one (the data loading ran regions on it) makes libgomp count more threads than
  // cores, and then its workers sleep after every region instead of spinning briefly, a futex
  // wake-up per region (an mlp epoch on 2 threads took 1.3x that of 2 ranks of 1 thread).
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(ranks - 1));
  for (int r = 1; r < ranks; ++r) threads.emplace_back(run_rank, r);
  run_rank(0);
  for (std::thread& t : threads) t.join();
  // The root cause first: the rank whose failure aborted the world; otherwise (a timeout or a
  // mismatch, which every rank reports alike) the lowest failing rank, for a stable message.
  const int origin = world.origin_rank();
  if (origin >= 0 && errors[static_cast<std::size_t>(origin)]) {
    std::rethrow_exception(errors[static_cast<std::size_t>(origin)]);
  }
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace noeira::dist
