#include "distributed/mpi_process_group.hpp"

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <utility>

#include "distributed/mpi_check.hpp"
#include "distributed/mpi_node_sums.hpp"
#include "distributed/mpi_ordered_sum.hpp"
#include "distributed/mpi_shared_sums.hpp"
#include "distributed/mpi_side_channel.hpp"
#include "distributed/mpi_work.hpp"
#include "distributed/watchdog.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

// --- MpiRuntime --------------------------------------------------------------------------------

namespace {
// A rank waiting for its peers polls Open MPI's progress engine; without yielding it keeps its
// core from whatever else is runnable there (a peer rank, an OpenMP thread, another job), and on
// an oversubscribed or shared machine epochs became several times slower and erratic
// (benchmarks/compare_pytorch_ddp.sh). sched_yield costs nothing when nothing else waits.
// Read at MPI_Init; the user's own setting wins.
void yield_when_idle() { setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0); }
}  // namespace

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int initialized = 0;
  NOEIRA_MPI_CHECK(MPI_Initialized(&initialized));
  int provided = 0;
  if (initialized) {
    NOEIRA_MPI_CHECK(MPI_Query_thread(&provided));
  } else {
    yield_when_idle();
    NOEIRA_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    owns_ = true;
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    throw LibraryError(detail::concat(
        "MPI provides thread level ", provided, ", below MPI_THREAD_MULTIPLE (",
        MPI_THREAD_MULTIPLE,
        "), which the collective watchdog needs; use an MPI built with thread support"));
  }
}

MpiRuntime::~MpiRuntime() {
  if (owns_) MPI_Finalize();
}

int MpiRuntime::world_rank() const {
  int rank = 0;
  NOEIRA_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  return rank;
}

int MpiRuntime::world_size() const {
  int size = 0;
  NOEIRA_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return size;
}

bool MpiRuntime::launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

namespace {

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::BF16: return MPI_UINT16_T;  // moved as bits: the sums are ours (fold_in_rank_order)
  }
  throw Error(detail::concat("MPI process group: no ", to_string(dtype), " collectives"));
}

int count_of(std::int64_t n, const CollectiveCall& call) {
  if (n > INT_MAX) {
    throw Error(detail::concat(to_string(call.kind), " #", call.seq, ": ", n,
                               " elements exceed MPI's int count; split the buffer"));
  }
  return static_cast<int>(n);
}

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup(std::shared_ptr<MpiSideChannel> shared, const ProcessGroupOptions& options)
      : ProcessGroup(shared->rank(), shared->size(), options,
                     std::make_shared<Watchdog>(
                         [s = shared](const CollectiveRecord& r) { s->fail_job(r); })),
        shared_(std::move(shared)),
        layout_(mpi_node_layout(shared_->comm(), shared_->rank())),
        sums_(shared_->comm(), shared_->rank(), shared_->size(), progress_, layout_),
        shared_sums_(layout_.nodes() == 1 ? SharedSums::create(shared_->comm(), shared_->rank(),
                                                               shared_->size(), progress_)
                                          : nullptr),
        node_sums_(NodeSums::create(shared_->comm(), shared_->rank(), layout_, progress_)) {}

  ~MpiProcessGroup() override { shared_->close(); }

  std::string_view backend() const override { return "mpi"; }
  std::string nodes() const override { return layout_.several_nodes(); }
  Target buffer_target() const override { return Target::Cpu; }
  std::shared_ptr<void> shared_memory(std::size_t bytes) override {
    SharedSums* sums = shared_sums_ != nullptr ? shared_sums_.get()
                       : node_sums_ != nullptr ? &node_sums_->node()
                                               : nullptr;
    if (sums == nullptr) return nullptr;
    // The window's allocation is a blocking collective the watchdog does not see: two ops it does
    // see first, so that a rank that never comes is named instead of hanging its peers. They
    // also give every rank the same verdict on room: a window lives in a file of a tmpfs
    // (/dev/shm, 64 MiB in a default container) whose pages are taken at first touch, so unless
    // every rank's part fits in half its free space (a touch beyond it kills the process with
    // SIGBUS), the buffer is ordinary memory and the ops copy it through their regions.
    std::int64_t total = static_cast<std::int64_t>(bytes);
    allreduce(std::span<std::int64_t>(&total, 1)).wait();
    std::int64_t short_of_room =
        static_cast<std::uint64_t>(total) > shared_window_free_bytes() / 2 ? 1 : 0;
    allreduce(std::span<std::int64_t>(&short_of_room, 1)).wait();
    if (short_of_room != 0) return nullptr;
    SharedSums::SharedBuffer buffer = sums->allocate(bytes);
    return std::shared_ptr<void>(std::move(buffer.owner), buffer.data);
  }

 protected:
  std::unique_ptr<WorkImpl> start(const CollectiveCall& call) override {
    shared_->publish(call);
    MPI_Comm comm = shared_->comm();
    MPI_Request req = MPI_REQUEST_NULL;
    const int n = count_of(call.count, call);
    const MPI_Datatype type = mpi_type(call.out.dtype);
    const std::size_t elem = dtype_size(call.out.dtype);
    char* out = static_cast<char*>(call.out.data);
    const char* in = call.in.bytes_begin();
    const bool shared_kind = call.kind == Collective::AllReduce ||
                             call.kind == Collective::ReduceScatter ||
                             call.kind == Collective::AllGather;
    if (shared_sums_ != nullptr && shared_kind) return shared_sums_->start(call);
    if (node_sums_ != nullptr && NodeSums::takes(call)) return node_sums_->start(call, type);
    switch (call.kind) {
      case Collective::AllReduce:
        return sums_.allreduce(call, type);
      case Collective::ReduceScatter:
        count_of(static_cast<std::int64_t>(call.in.count), call);
        return sums_.reduce_scatter(call, type);
      case Collective::AllGather: {
        count_of(static_cast<std::int64_t>(call.out.count), call);
        const bool in_place = in == out + static_cast<std::size_t>(rank()) * call.in.count * elem;
        NOEIRA_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : call.in.data, n, type, out, n,
                                        type, comm, &req));
        break;
      }
      case Collective::Broadcast:
        NOEIRA_MPI_CHECK(MPI_Ibcast(out, n, type, call.root, comm, &req));
        break;
      case Collective::Barrier:
        NOEIRA_MPI_CHECK(MPI_Ibarrier(comm, &req));
        break;
    }
    return std::make_unique<MpiWork>(std::vector<MPI_Request>{req}, progress_);
  }

 private:
  std::shared_ptr<MpiSideChannel> shared_;
  MpiProgress progress_;  // before sums_, which posts into it
  NodeLayout layout_;     // the ranks' nodes: the order of every sum (node_layout.hpp)
  OrderedSums sums_;      // allreduce and reduce-scatter by MPI messages between all ranks
  // The ranks all on one node: allreduce, reduce-scatter and all-gather through shared memory,
  // in the same order. Null otherwise.
  std::unique_ptr<SharedSums> shared_sums_;
  // Several nodes of as many consecutive ranks each: through each node's shared memory and
  // messages between the nodes (mpi_node_sums.hpp), in the same order. Null otherwise.
  std::unique_ptr<NodeSums> node_sums_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_mpi_process_group(const ProcessGroupOptions& options,
                                                     MPI_Comm comm) {
  int initialized = 0;
  NOEIRA_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized)
    throw Error("MPI process group: MPI is not initialized (create an MpiRuntime first)");
  auto shared = std::make_shared<MpiSideChannel>(comm);
  return std::make_unique<MpiProcessGroup>(std::move(shared), options);
}

}  // namespace noeira::dist
