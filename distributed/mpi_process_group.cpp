#include "distributed/mpi_process_group.hpp"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "distributed/mpi_check.hpp"
#include "distributed/mpi_side_channel.hpp"
#include "distributed/watchdog.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

void mpi_fail(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    std::snprintf(text, sizeof text, "code %d", code);
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw LibraryError(
      detail::concat(call, " failed on rank ", rank, ": ", text, " [", file, ":", line, "]"));
}

// --- MpiRuntime --------------------------------------------------------------------------------

namespace {
// Open MPI's non-blocking allreduce (libnbc) reduces to a root and broadcasts back whenever there
// are fewer than 4 ranks or the call is in place, i.e. for every allreduce we post (always in
// place): twice the traffic of a bandwidth-optimal algorithm, measured 2-2.5x slower than
// MPI_Allreduce at >= 1 MiB (benchmarks/bench_collectives.cpp). Rabenseifner's algorithm
// (reduce-scatter by recursive halving, all-gather by recursive doubling; libnbc's number 3)
// brings it to 0.9-1.0x. Read at MPI_Init; a choice the user made (an OMPI_MCA_ variable, which
// is also how `mpirun --mca` passes it) wins. Other MPI libraries ignore the variable.
void prefer_bandwidth_optimal_iallreduce() {
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", /*overwrite=*/0);
}

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
    prefer_bandwidth_optimal_iallreduce();
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
    case DType::BF16: break;
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

class MpiWork final : public WorkImpl {
 public:
  // on_complete runs once, on the caller's thread, when the request has completed.
  MpiWork(MPI_Request request, std::function<void()> on_complete)
      : request_(request), on_complete_(std::move(on_complete)) {}

  bool test() override {
    int flag = 0;
    NOEIRA_MPI_CHECK(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE));
    if (flag) complete();
    return flag != 0;
  }
  void wait() override {
    NOEIRA_MPI_CHECK(MPI_Wait(&request_, MPI_STATUS_IGNORE));
    complete();
  }

 private:
  void complete() {
    if (on_complete_) std::exchange(on_complete_, nullptr)();
  }

  MPI_Request request_;
  std::function<void()> on_complete_;
};

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup(std::shared_ptr<MpiSideChannel> shared, const ProcessGroupOptions& options)
      : ProcessGroup(shared->rank(), shared->size(), options,
                     std::make_shared<Watchdog>(
                         [s = shared](const CollectiveRecord& r) { s->fail_job(r); })),
        shared_(std::move(shared)) {}

  ~MpiProcessGroup() override { shared_->close(); }

  std::string_view backend() const override { return "mpi"; }
  Target buffer_target() const override { return Target::Cpu; }

 protected:
  std::unique_ptr<WorkImpl> start(const CollectiveCall& call) override {
    shared_->publish(call);
    MPI_Comm comm = shared_->comm();
    MPI_Request req = MPI_REQUEST_NULL;
    std::function<void()> on_complete;
    const int n = count_of(call.count, call);
    const MPI_Datatype type = mpi_type(call.out.dtype);
    const std::size_t elem = dtype_size(call.out.dtype);
    char* out = static_cast<char*>(call.out.data);
    const char* in = call.in.bytes_begin();
    switch (call.kind) {
      case Collective::AllReduce:
        NOEIRA_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, out, n, type, MPI_SUM, comm, &req));
        break;
      case Collective::ReduceScatter: {
        count_of(static_cast<std::int64_t>(call.in.count), call);
        const std::size_t seg = static_cast<std::size_t>(rank()) * call.out.bytes();
        if (out == in + seg) {
          // MPI's in-place form reads the whole buffer and leaves the result at its START; the
          // funnel's contract puts it at this rank's segment, so move it there on completion.
          // The buffer is the caller's writable `out` region's enclosing array.
          char* whole = out - seg;
          NOEIRA_MPI_CHECK(
              MPI_Ireduce_scatter_block(MPI_IN_PLACE, whole, n, type, MPI_SUM, comm, &req));
          if (seg != 0) {
            on_complete = [whole, out, bytes = call.out.bytes()] {
              std::memmove(out, whole, bytes);
            };
          }
        } else {
          NOEIRA_MPI_CHECK(
              MPI_Ireduce_scatter_block(call.in.data, out, n, type, MPI_SUM, comm, &req));
        }
        break;
      }
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
    return std::make_unique<MpiWork>(req, std::move(on_complete));
  }

 private:
  std::shared_ptr<MpiSideChannel> shared_;
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
