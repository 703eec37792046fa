// The NCCL backend (see nccl_process_group.hpp), built into the CUDA plugin (kernels/
// cuda_plugin.hpp), whose entry it fills at the end; the binary reaches it through
// nccl_backend.cpp. Compiled to nothing in CPU builds, so that they need neither CUDA's nor
// NCCL's headers.
#ifdef NOEIRA_HAVE_CUDA

#include "distributed/nccl_backend.hpp"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "distributed/mpi_check.hpp"
#include "distributed/mpi_side_channel.hpp"
#include "distributed/nccl_bf16_sums.hpp"
#include "distributed/nccl_check.hpp"
#include "kernels/cuda/check.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

namespace {

int world_rank() {
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

}  // namespace

void nccl_fail(ncclResult_t code, const char* call, const char* file, int line) {
  // ncclGetLastError(nullptr) is the library's most recent message, often more precise than the
  // code's string ("Duplicate GPU detected ...").
  const char* last = ncclGetLastError(nullptr);
  const std::string detail_text =
      last != nullptr && *last != '\0' ? detail::concat(" (", last, ")") : std::string();
  throw LibraryError(detail::concat(call, " failed on rank ", world_rank(), ": ",
                                    ncclGetErrorString(code), detail_text, " [", file, ":", line,
                                    "]"));
}

namespace {

int visible_cuda_devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: keep it from surfacing in an unrelated later call
    return 0;
  }
  return count;
}

int select_local_device(MPI_Comm comm) {
  MPI_Comm local = MPI_COMM_NULL;
  int world = 0;
  NOEIRA_MPI_CHECK(MPI_Comm_rank(comm, &world));
  NOEIRA_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, world, MPI_INFO_NULL, &local));
  int local_rank = 0;
  const int rc = MPI_Comm_rank(local, &local_rank);
  MPI_Comm_free(&local);
  NOEIRA_MPI_CHECK(rc);
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    throw LibraryError(detail::concat(
        "NCCL process group: rank ", world, " sees no CUDA device (cudaGetDeviceCount: ",
        status == cudaSuccess ? "0 devices" : cudaGetErrorString(status),
        "); the NCCL backend needs one GPU per rank"));
  }
  const int device = local_rank % count;
  CUDA_CHECK(cudaSetDevice(device));
  return device;
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::BF16: return ncclBfloat16;  // moved only: bf16 sums are nccl_bf16_sums.hpp's
  }
  throw Error(detail::concat("NCCL process group: no ", to_string(dtype), " collectives"));
}

// Makes `device` current on the calling thread for a scope, and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// The communicator and its CUDA resources, shared by the group, its Works and the watchdog
// handler.
//
// Aborting vs using the communicator: ncclCommAbort frees it, so a thread that is inside an NCCL
// call on it when the watchdog aborts would use freed memory. Every use therefore registers in
// `users` and first checks `aborting`; the abort raises `aborting`, waits (bounded) for the
// users to leave, then aborts. Sequentially consistent atomics make this Dekker-style handshake
// sound: either the user sees the flag, or the aborter sees the user. The wait is bounded because
// a user blocked inside NCCL (a lazy connection to a peer that never comes) is exactly what the
// abort must release; the process ends right after anyway (MpiSideChannel::fail_job).
struct NcclShared {
  std::shared_ptr<MpiSideChannel> channel;
  std::atomic<ncclComm_t> comm{nullptr};  // null once destroyed or aborted
  int device = -1;
  cudaStream_t compute = nullptr;      // the caller's
  cudaStream_t comm_stream = nullptr;  // ours: every op runs here, in call order
  cudaEvent_t ready = nullptr;         // recorded on `compute` as each op starts
  float* scratch = nullptr;            // [1] device: the barrier's allreduce
  NcclBf16Sums bf16_sums;              // allreduce and reduce-scatter of bf16 buffers
  std::atomic<bool> aborting{false};
  std::atomic<int> users{0};
  std::atomic<bool> failed{false};  // an asynchronous error was seen: abort, never destroy

  // A scope that uses the communicator; false when the watchdog is aborting it.
  class Use {
   public:
    explicit Use(NcclShared& s) : s_(s) {
      s_.users.fetch_add(1);
      ok_ = !s_.aborting.load();
      if (!ok_) s_.users.fetch_sub(1);
    }
    ~Use() {
      if (ok_) s_.users.fetch_sub(1);
    }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    explicit operator bool() const { return ok_; }

   private:
    NcclShared& s_;
    bool ok_ = false;
  };

  // Throws on an asynchronous NCCL error (a peer or link failed). Quiet while aborting.
  void check_async() {
    Use use(*this);
    const ncclComm_t c = comm.load();
    if (!use || c == nullptr) return;
    ncclResult_t async = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(c, &async));
    if (async != ncclSuccess && async != ncclInProgress) {
      failed.store(true);
      const char* last = ncclGetLastError(c);
      throw LibraryError(detail::concat("NCCL asynchronous error on rank ", channel->rank(), ": ",
                                        ncclGetErrorString(async), " (",
                                        last != nullptr ? last : "", ")"));
    }
  }

  // The watchdog's step before MPI_Abort. Runs on the watchdog thread; never throws.
  void abort_comm() noexcept {
    aborting.store(true);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (users.load() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const ncclComm_t c = comm.exchange(nullptr);
    if (c == nullptr) return;
    // Bounded too: an abort that itself hangs must not keep the job alive.
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> finished = done->get_future();
    std::thread([c, dev = device, done] {
      (void)cudaSetDevice(dev);
      const ncclResult_t r = ncclCommAbort(c);
      if (r != ncclSuccess) {
        std::fprintf(stderr, "noeira: error: watchdog: ncclCommAbort: %s\n", ncclGetErrorString(r));
      }
      done->set_value();
    }).detach();
    if (finished.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      std::fprintf(stderr, "noeira: error: watchdog: ncclCommAbort did not return in 10 s\n");
    }
  }

  // Collective teardown, on every rank together with nothing in flight.
  void close() noexcept {
    const ncclComm_t c = aborting.load() ? nullptr : comm.exchange(nullptr);
    if (c != nullptr) {
      // ncclCommDestroy flushes and waits for the peers: while an exception unwinds this rank
      // alone, or after an asynchronous error, abort locally instead of hanging.
      const bool alone = std::uncaught_exceptions() > 0 || failed.load();
      const ncclResult_t r = alone ? ncclCommAbort(c) : ncclCommDestroy(c);
      if (r != ncclSuccess) {
        std::fprintf(stderr, "noeira: error: NCCL communicator teardown on rank %d: %s\n",
                     channel->rank(), ncclGetErrorString(r));
      }
    }
    if (scratch != nullptr) (void)cudaFree(scratch);
    bf16_sums.release();
    if (ready != nullptr) (void)cudaEventDestroy(ready);
    if (comm_stream != nullptr) (void)cudaStreamDestroy(comm_stream);
    scratch = nullptr;
    ready = nullptr;
    comm_stream = nullptr;
    channel->close();
  }
};

class NcclWork final : public WorkImpl {
 public:
  NcclWork(std::shared_ptr<NcclShared> shared, cudaEvent_t done)
      : shared_(std::move(shared)), done_(done) {}
  ~NcclWork() override { (void)cudaEventDestroy(done_); }  // released once it completes
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  bool test() override {
    const cudaError_t status = cudaEventQuery(done_);
    if (status == cudaSuccess) return true;
    if (status != cudaErrorNotReady) {
      throw LibraryError(detail::concat("cudaEventQuery of an NCCL op on rank ",
                                        shared_->channel->rank(),
                                        " failed: ", cudaGetErrorString(status)));
    }
    shared_->check_async();
    return false;
  }

  // Polls rather than cudaEventSynchronize, so that an asynchronous NCCL error ends the wait.
  // While the watchdog aborts, test() stays false and this waits for the job to end.
  void wait() override {
    for (int polls = 0; !test(); ++polls) {
      if (polls < 1000) {
        std::this_thread::yield();  // short ops: answer within microseconds
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));  // long ones: free the core
      }
    }
  }

 private:
  std::shared_ptr<NcclShared> shared_;
  cudaEvent_t done_;
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(std::shared_ptr<NcclShared> shared, const ProcessGroupOptions& options)
      : ProcessGroup(shared->channel->rank(), shared->channel->size(), options,
                     std::make_shared<Watchdog>([s = shared](const CollectiveRecord& r) {
                       s->channel->fail_job(r, [s] { s->abort_comm(); });
                     })),
        shared_(std::move(shared)) {}

  ~NcclProcessGroup() override {
    try {
      DeviceGuard guard(shared_->device);
      shared_->close();
    } catch (...) {
      shared_->close();  // the device could not be made current: tear down what we can
    }
  }

  std::string_view backend() const override { return "nccl"; }
  Target buffer_target() const override { return Target::Cuda; }
  bool ordered_after(Stream compute) const override {
    return cuda::as_cuda(compute) == shared_->compute;
  }

 protected:
  std::unique_ptr<WorkImpl> start(const CollectiveCall& call) override {
    NcclShared& s = *shared_;
    s.channel->publish(call);
    DeviceGuard guard(s.device);
    cudaEvent_t done = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    auto work = std::make_unique<NcclWork>(shared_, done);
    // The op reads what the compute stream produced before this call (the gradients of the vjp
    // that just ran): the comm stream waits for it on the device, so the host and the compute
    // stream go on, and the compute enqueued from now on overlaps the op.
    CUDA_CHECK(cudaEventRecord(s.ready, s.compute));
    CUDA_CHECK(cudaStreamWaitEvent(s.comm_stream, s.ready, 0));
    enqueue(call);
    CUDA_CHECK(cudaEventRecord(done, s.comm_stream));
    return work;
  }

 private:
  void enqueue(const CollectiveCall& call) {
    NcclShared& s = *shared_;
    NcclShared::Use use(s);
    const ncclComm_t c = s.comm.load();
    if (!use || c == nullptr) throw Error("the NCCL communicator is aborted or closed");
    const auto n = static_cast<std::size_t>(call.count);
    const ncclDataType_t type = nccl_type(call.out.dtype);
    // Counts are equal on every rank, so an empty op is skipped on all of them alike.
    if (n == 0 && call.kind != Collective::Barrier) return;
    const bool bf16_sum = call.out.dtype == DType::BF16 && (call.kind == Collective::AllReduce ||
                                                            call.kind == Collective::ReduceScatter);
    if (bf16_sum) {
      if (call.kind == Collective::AllReduce) {
        s.bf16_sums.allreduce(call, c, rank(), size(), s.comm_stream);
      } else {
        s.bf16_sums.reduce_scatter(call, c, rank(), size(), s.comm_stream);
      }
      return;
    }
    switch (call.kind) {
      case Collective::AllReduce:
        NCCL_CHECK(ncclAllReduce(call.out.data, call.out.data, n, type, ncclSum, c,
                                 s.comm_stream));
        break;
      case Collective::ReduceScatter:
        // In place when out is this rank's segment of in: NCCL's in-place rule is the funnel's.
        NCCL_CHECK(ncclReduceScatter(call.in.data, call.out.data, n, type, ncclSum, c,
                                     s.comm_stream));
        break;
      case Collective::AllGather:
        // In place when in is this rank's segment of out: again the same rule in both.
        NCCL_CHECK(
            ncclAllGather(call.in.data, call.out.data, n, type, c, s.comm_stream));
        break;
      case Collective::Broadcast:
        NCCL_CHECK(ncclBroadcast(call.out.data, call.out.data, n, type, call.root, c,
                                 s.comm_stream));
        break;
      case Collective::Barrier:
        // NCCL has no barrier; a one-element allreduce completes only once every rank entered.
        NCCL_CHECK(ncclAllReduce(s.scratch, s.scratch, 1, ncclFloat32, ncclSum, c, s.comm_stream));
        break;
    }
  }

  std::shared_ptr<NcclShared> shared_;
};

// The CUDA resources of a group on its device; on failure, what was made is released by close().
void create_cuda_resources(NcclShared& s) {
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  // Non-blocking: the legacy default stream (a common compute stream) would otherwise serialize
  // with it and kill the overlap. Highest priority: communication kernels get SMs promptly while
  // backward keeps the GPU busy, so the reduction finishes soon after the gradients do.
  CUDA_CHECK(cudaStreamCreateWithPriority(&s.comm_stream, cudaStreamNonBlocking, greatest));
  CUDA_CHECK(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming));
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&s.scratch), sizeof(float)));
  CUDA_CHECK(cudaMemset(s.scratch, 0, sizeof(float)));
}

std::unique_ptr<ProcessGroup> make_nccl_process_group(const ProcessGroupOptions& options,
                                                      Stream compute_stream, MPI_Comm comm) {
  int initialized = 0;
  NOEIRA_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    throw Error("NCCL process group: MPI is not initialized (create an MpiRuntime first)");
  }
  // ProcessGroup's own check, made before anything is created: thrown from its constructor it
  // would leave the communicator, streams and side channel made below unreleased.
  NOEIRA_CHECK(options.timeout > Milliseconds::zero(), "process group: timeout must be > 0");
  auto shared = std::make_shared<NcclShared>();
  shared->channel = std::make_shared<MpiSideChannel>(comm);
  shared->compute = cuda::as_cuda(compute_stream);
  const MPI_Comm mpi = shared->channel->comm();
  const int rank = shared->channel->rank();
  const int size = shared->channel->size();

  // Local setup; its outcome is agreed on before anyone enters NCCL (see the header).
  struct Bootstrap {
    int ok = 1;
    ncclUniqueId id{};
  } boot;
  std::exception_ptr local_error;
  try {
    shared->device = select_local_device(mpi);
    create_cuda_resources(*shared);
    if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&boot.id));
  } catch (...) {
    local_error = std::current_exception();
    boot.ok = 0;
  }
  std::vector<int> ok(static_cast<std::size_t>(size), 0);
  NOEIRA_MPI_CHECK(MPI_Allgather(&boot.ok, 1, MPI_INT, ok.data(), 1, MPI_INT, mpi));
  std::string failed_ranks;
  for (int r = 0; r < size; ++r) {
    if (ok[static_cast<std::size_t>(r)]) continue;
    failed_ranks += detail::concat(failed_ranks.empty() ? "" : ", ", r);
  }
  if (!failed_ranks.empty()) {
    shared->close();
    if (local_error) std::rethrow_exception(local_error);
    throw LibraryError(detail::concat("NCCL process group: setup failed on rank(s) ", failed_ranks,
                                      " (their own messages say why); rank ", rank, " was fine"));
  }
  // The id is plain bytes (NCCL documents it as broadcastable with any CPU transport).
  NOEIRA_MPI_CHECK(MPI_Bcast(&boot.id, sizeof boot.id, MPI_BYTE, 0, mpi));
  try {
    ncclComm_t c = nullptr;
    NCCL_CHECK(ncclCommInitRank(&c, size, boot.id, rank));
    shared->comm.store(c);
  } catch (...) {
    // Not collective here: the peers may have failed the same way or may be waiting in NCCL,
    // which reports its own error; leak the MPI side rather than risk a hang.
    if (shared->scratch != nullptr) (void)cudaFree(shared->scratch);
    if (shared->ready != nullptr) (void)cudaEventDestroy(shared->ready);
    if (shared->comm_stream != nullptr) (void)cudaStreamDestroy(shared->comm_stream);
    throw;
  }
  return std::make_unique<NcclProcessGroup>(std::move(shared), options);
}

}  // namespace

}  // namespace noeira::dist

extern "C" const noeira::dist::NcclBackendEntry* noeira_nccl_backend() {
  static const noeira::dist::NcclBackendEntry entry = {
      .visible_devices = &noeira::dist::visible_cuda_devices,
      .select_local_device = &noeira::dist::select_local_device,
      .make_group = &noeira::dist::make_nccl_process_group,
  };
  return &entry;
}

#endif  // NOEIRA_HAVE_CUDA
