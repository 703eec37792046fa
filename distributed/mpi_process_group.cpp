#include "distributed/mpi_process_group.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "distributed/mpi_check.hpp"
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

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int initialized = 0;
  NOEIRA_MPI_CHECK(MPI_Initialized(&initialized));
  int provided = 0;
  if (initialized) {
    NOEIRA_MPI_CHECK(MPI_Query_thread(&provided));
  } else {
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

// What a rank publishes about the collective it entered last: {seq, kind, count}.
constexpr int kEntryWords = 3;

int count_of(std::int64_t n, const CollectiveCall& call) {
  if (n > INT_MAX) {
    throw Error(detail::concat(to_string(call.kind), " #", call.seq, ": ", n,
                               " elements exceed MPI's int count; split the buffer"));
  }
  return static_cast<int>(n);
}

// The duplicated communicator and the side-channel window, shared by the group and the watchdog
// handler (which must not outlive them: the group is destroyed with nothing in flight).
struct MpiShared {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Win win = MPI_WIN_NULL;
  std::int64_t* entry = nullptr;  // [kEntryWords] this rank's published entry, in the window
  int rank = 0;
  int size = 1;

  void publish(const CollectiveCall& call) {
    NOEIRA_MPI_CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    entry[0] = static_cast<std::int64_t>(call.seq);
    entry[1] = static_cast<std::int64_t>(call.kind);
    entry[2] = call.count;
    NOEIRA_MPI_CHECK(MPI_Win_unlock(rank, win));
  }

  // Every peer's published entry; this rank's own is the record's.
  std::vector<std::array<std::int64_t, kEntryWords>> read_all() const {
    std::vector<std::array<std::int64_t, kEntryWords>> all(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      NOEIRA_MPI_CHECK(MPI_Win_lock(MPI_LOCK_SHARED, r, 0, win));
      NOEIRA_MPI_CHECK(MPI_Get(all[static_cast<std::size_t>(r)].data(), kEntryWords, MPI_INT64_T, r,
                               0, kEntryWords, MPI_INT64_T, win));
      NOEIRA_MPI_CHECK(MPI_Win_unlock(r, win));
    }
    return all;
  }

  // Runs on the watchdog thread. Never returns: the job ends here.
  void on_timeout(const CollectiveRecord& record) {
    // The query runs on its own thread with a bounded wait, so that a side channel which itself
    // hangs (a peer whose MPI library is wedged) cannot keep the job alive.
    auto query = std::make_shared<std::promise<std::string>>();
    std::future<std::string> answer = query->get_future();
    std::thread([this, record, query] {
      try {
        const auto all = read_all();
        std::vector<int> missing;
        std::string mismatched;
        for (int r = 0; r < size; ++r) {
          if (r == rank) continue;
          const auto& e = all[static_cast<std::size_t>(r)];
          if (e[0] < static_cast<std::int64_t>(record.seq)) {
            missing.push_back(r);
          } else if (e[0] == static_cast<std::int64_t>(record.seq) &&
                     (e[1] != static_cast<std::int64_t>(record.kind) || e[2] != record.count)) {
            mismatched +=
                detail::concat("; rank ", r, " entered ", to_string(static_cast<Collective>(e[1])),
                               " #", e[0], " of ", e[2], " elements");
          }
        }
        query->set_value(timeout_message(record, missing) + mismatched);
      } catch (...) {
        query->set_exception(std::current_exception());
      }
    }).detach();
    std::string message;
    const auto budget = std::min(record.timeout, Milliseconds(10000));
    if (answer.wait_for(budget) == std::future_status::ready) {
      try {
        message = answer.get();
      } catch (const std::exception& e) {
        message = timeout_message(record, {}) + " (side channel failed: " + e.what() + ")";
      }
    } else {
      message = timeout_message(record, {}) + " (side channel did not answer)";
    }
    std::fprintf(stderr, "noeira: error: %s (seen by rank %d of %d)\n", message.c_str(), rank,
                 size);
    std::fflush(stderr);
    MPI_Abort(comm, kWatchdogExitCode);
    std::_Exit(kWatchdogExitCode);  // MPI_Abort should not return; make sure
  }
};

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
  MpiProcessGroup(std::shared_ptr<MpiShared> shared, const ProcessGroupOptions& options)
      : ProcessGroup(shared->rank, shared->size, options,
                     std::make_shared<Watchdog>(
                         [s = shared](const CollectiveRecord& r) { s->on_timeout(r); })),
        shared_(std::move(shared)) {}

  ~MpiProcessGroup() override {
    // Freeing is collective; while an exception unwinds this rank alone, skip it (leak) rather
    // than hang: the failing binary aborts the job anyway.
    if (std::uncaught_exceptions() > 0) return;
    MPI_Win_free(&shared_->win);
    MPI_Comm_free(&shared_->comm);
  }

  std::string_view backend() const override { return "mpi"; }

 protected:
  std::unique_ptr<WorkImpl> start(const CollectiveCall& call) override {
    shared_->publish(call);
    MPI_Comm comm = shared_->comm;
    MPI_Request req = MPI_REQUEST_NULL;
    std::function<void()> on_complete;
    const int n = count_of(call.count, call);
    switch (call.kind) {
      case Collective::AllReduce:
        NOEIRA_MPI_CHECK(
            MPI_Iallreduce(MPI_IN_PLACE, call.out.data(), n, MPI_FLOAT, MPI_SUM, comm, &req));
        break;
      case Collective::ReduceScatter: {
        count_of(static_cast<std::int64_t>(call.in.size()), call);
        const std::size_t seg = static_cast<std::size_t>(rank()) * call.out.size();
        if (call.out.data() == call.in.data() + seg) {
          // MPI's in-place form reads the whole buffer and leaves the result at its START; the
          // funnel's contract puts it at this rank's segment, so move it there on completion.
          // The buffer is the caller's writable `out` region's enclosing array.
          float* whole = call.out.data() - seg;
          NOEIRA_MPI_CHECK(
              MPI_Ireduce_scatter_block(MPI_IN_PLACE, whole, n, MPI_FLOAT, MPI_SUM, comm, &req));
          if (seg != 0) {
            on_complete = [whole, out = call.out] {
              std::memmove(out.data(), whole, out.size() * sizeof(float));
            };
          }
        } else {
          NOEIRA_MPI_CHECK(MPI_Ireduce_scatter_block(call.in.data(), call.out.data(), n, MPI_FLOAT,
                                                     MPI_SUM, comm, &req));
        }
        break;
      }
      case Collective::AllGather: {
        count_of(static_cast<std::int64_t>(call.out.size()), call);
        const bool in_place =
            call.in.data() == call.out.data() + static_cast<std::size_t>(rank()) * call.in.size();
        NOEIRA_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : call.in.data(), n, MPI_FLOAT,
                                        call.out.data(), n, MPI_FLOAT, comm, &req));
        break;
      }
      case Collective::Broadcast:
        NOEIRA_MPI_CHECK(MPI_Ibcast(call.out.data(), n, MPI_FLOAT, call.root, comm, &req));
        break;
      case Collective::Barrier:
        NOEIRA_MPI_CHECK(MPI_Ibarrier(comm, &req));
        break;
    }
    return std::make_unique<MpiWork>(req, std::move(on_complete));
  }

 private:
  std::shared_ptr<MpiShared> shared_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_mpi_process_group(const ProcessGroupOptions& options,
                                                     MPI_Comm comm) {
  int initialized = 0;
  NOEIRA_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized)
    throw Error("MPI process group: MPI is not initialized (create an MpiRuntime first)");
  auto shared = std::make_shared<MpiShared>();
  // Our own communicator: our collectives never match a caller's, and errors return to us.
  NOEIRA_MPI_CHECK(MPI_Comm_dup(comm, &shared->comm));
  NOEIRA_MPI_CHECK(MPI_Comm_set_errhandler(shared->comm, MPI_ERRORS_RETURN));
  NOEIRA_MPI_CHECK(MPI_Comm_rank(shared->comm, &shared->rank));
  NOEIRA_MPI_CHECK(MPI_Comm_size(shared->comm, &shared->size));
  NOEIRA_MPI_CHECK(MPI_Win_allocate(kEntryWords * sizeof(std::int64_t), sizeof(std::int64_t),
                                    MPI_INFO_NULL, shared->comm, &shared->entry, &shared->win));
  NOEIRA_MPI_CHECK(MPI_Win_set_errhandler(shared->win, MPI_ERRORS_RETURN));
  for (int i = 0; i < kEntryWords; ++i) shared->entry[i] = 0;
  // Every rank's entry is initialized before any peer may read it.
  NOEIRA_MPI_CHECK(MPI_Barrier(shared->comm));
  return std::make_unique<MpiProcessGroup>(std::move(shared), options);
}

}  // namespace noeira::dist
