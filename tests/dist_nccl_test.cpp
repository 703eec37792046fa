// The NCCL process group with device buffers (issue 6): every collective exact on crafted inputs
// (tests/dist_checks.hpp's values), in place and out of place, ordered after the compute stream,
// counted by the funnel; setup refused with a clear message on a rank without a GPU.
//
// Its own GoogleTest binary, not part of noeira_tests, because it owns MPI initialization (NCCL
// is bootstrapped through MPI) and MPI must not be initialized inside the unit-test binary, whose
// other tests fork the noeira binary. tests/dist_nccl.cmake runs it test by test as one rank and
// under mpiexec -n 2. Every GPU test skips with the reason when there is no GPU (or fewer GPUs on
// the node than ranks), and in builds without CUDA.
//
//   dist_nccl_test [gtest flags]              the tests
//   dist_nccl_test watchdog <ms> <rank>       rank <rank> skips allreduce #2: the job must abort
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#ifdef NOEIRA_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "dist_checks.hpp"
#include "dist_training.hpp"
#include "distributed/mpi_process_group.hpp"
#include "distributed/nccl_process_group.hpp"
#include "kernels/error.hpp"
#endif

namespace {

#ifndef NOEIRA_HAVE_CUDA

TEST(DistNccl, NeedsCudaBuild) {
  GTEST_SKIP() << "built without CUDA (NOEIRA_CUDA=OFF): no NCCL backend to test";
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

#else  // NOEIRA_HAVE_CUDA

using namespace noeira;
using namespace noeira::dist;

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// A device buffer of T for one test (the tests' own: no Tensor needed to hold bytes).
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n) : n_(n) {
    if (n_ > 0 && cudaMalloc(reinterpret_cast<void**>(&p_), n_ * sizeof(T)) != cudaSuccess) {
      throw LibraryError("cudaMalloc failed in the test");
    }
  }
  ~DeviceArray() { (void)cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() { return p_; }
  std::span<T> span() { return {p_, n_}; }
  std::span<T> segment(std::size_t i, std::size_t len) { return {p_ + i * len, len}; }
  void upload(const std::vector<T>& host) {
    if (n_ == 0) return;
    // From pageable memory cudaMemcpy may return before the data lands; the group's ops are
    // ordered after the suite's compute stream only, so wait for it here.
    if (cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
      throw LibraryError("upload failed in the test");
    }
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (n_ == 0) return host;
    if (cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess) {
      throw LibraryError("download failed in the test");
    }
    return host;
  }

 private:
  T* p_ = nullptr;
  std::size_t n_;
};
using DeviceBuffer = DeviceArray<float>;

int mpi_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int local_ranks() {
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int n = 1;
  MPI_Comm_size(local, &n);
  MPI_Comm_free(&local);
  return n;
}

// Why this machine cannot run the NCCL tests, or empty when it can. Collective (same on every
// rank of a node, so all ranks skip together).
std::string why_not_runnable() {
  const int devices = visible_cuda_devices();
  const int ranks = local_ranks();
  if (devices == 0) {
    return "no CUDA device visible (cudaGetDeviceCount finds none): the NCCL backend needs one "
           "GPU per rank";
  }
  if (ranks > devices) {
    return detail::concat(ranks, " ranks on this node but ", devices,
                          " visible GPU(s): NCCL needs one GPU per rank");
  }
  return {};
}

// Wrong elements summed over ranks, so every rank reaches the same verdict.
long long total_over_ranks(std::int64_t mine) {
  long long local = static_cast<long long>(mine), total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

// One group for the suite: creating an NCCL communicator costs far more than the checks.
class DistNccl : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skip_reason_ = new std::string(why_not_runnable());
    if (!skip_reason_->empty()) return;
    select_local_device();
    // A non-blocking compute stream: nothing orders it with the comm stream but the group's
    // events, which is what OrderedAfterTheComputeStream checks.
    if (cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking) != cudaSuccess) {
      throw LibraryError("cudaStreamCreate failed in the test");
    }
    group_ =
        make_nccl_process_group(ProcessGroupOptions{std::chrono::seconds(60)}, compute_).release();
  }
  static void TearDownTestSuite() {
    delete group_;  // collective, before MPI_Finalize
    group_ = nullptr;
    if (compute_ != nullptr) (void)cudaStreamDestroy(compute_);
    compute_ = nullptr;
    delete skip_reason_;
    skip_reason_ = nullptr;
  }
  void SetUp() override {
    if (!skip_reason_->empty()) GTEST_SKIP() << *skip_reason_;
  }

  static ProcessGroup& pg() { return *group_; }

  static inline std::string* skip_reason_ = nullptr;
  static inline ProcessGroup* group_ = nullptr;
  static inline cudaStream_t compute_ = nullptr;
};

std::int64_t check_allreduce(ProcessGroup& pg, std::int64_t n) {
  std::vector<float> host(static_cast<std::size_t>(n)), want(host.size(), 0.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    host[static_cast<std::size_t>(i)] = checks::value(pg.rank(), i);
    for (int r = 0; r < pg.size(); ++r) want[static_cast<std::size_t>(i)] += checks::value(r, i);
  }
  DeviceBuffer buf(host.size());
  buf.upload(host);
  pg.allreduce(buf.span()).wait();
  return checks::count_wrong(buf.download(), want);
}

std::int64_t check_reduce_scatter(ProcessGroup& pg, std::int64_t n, bool in_place) {
  const auto seg = static_cast<std::size_t>(n);
  std::vector<float> in(seg * static_cast<std::size_t>(pg.size())), want(seg, 0.0f);
  for (std::size_t j = 0; j < in.size(); ++j) {
    in[j] = checks::value(pg.rank(), static_cast<std::int64_t>(j));
  }
  for (std::size_t i = 0; i < seg; ++i) {
    for (int r = 0; r < pg.size(); ++r) {
      want[i] += checks::value(r, static_cast<std::int64_t>(pg.rank() * seg + i));
    }
  }
  DeviceBuffer din(in.size());
  din.upload(in);
  if (in_place) {
    pg.reduce_scatter(din.span(), din.segment(static_cast<std::size_t>(pg.rank()), seg)).wait();
    const std::vector<float> all = din.download();
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(pg.rank() * seg);
    return checks::count_wrong(std::vector<float>(first, first + static_cast<std::ptrdiff_t>(seg)),
                               want);
  }
  DeviceBuffer out(seg);
  out.upload(std::vector<float>(seg, -7.0f));
  pg.reduce_scatter(din.span(), out.span()).wait();
  return checks::count_wrong(out.download(), want);
}

std::int64_t check_all_gather(ProcessGroup& pg, std::int64_t n, bool in_place) {
  const auto seg = static_cast<std::size_t>(n);
  std::vector<float> in(seg), out(seg * static_cast<std::size_t>(pg.size()), -7.0f),
      want(out.size());
  for (std::size_t i = 0; i < seg; ++i)
    in[i] = checks::value(pg.rank(), static_cast<std::int64_t>(i));
  for (int q = 0; q < pg.size(); ++q) {
    for (std::size_t i = 0; i < seg; ++i) {
      want[q * seg + i] = checks::value(q, static_cast<std::int64_t>(i));
    }
  }
  DeviceBuffer dout(out.size());
  if (in_place) {
    std::copy(in.begin(), in.end(), out.begin() + static_cast<std::ptrdiff_t>(pg.rank() * seg));
    dout.upload(out);
    pg.all_gather(dout.segment(static_cast<std::size_t>(pg.rank()), seg), dout.span()).wait();
  } else {
    DeviceBuffer din(seg);
    din.upload(in);
    dout.upload(out);
    pg.all_gather(din.span(), dout.span()).wait();
  }
  return checks::count_wrong(dout.download(), want);
}

std::int64_t check_broadcast(ProcessGroup& pg, std::int64_t n, int root) {
  std::vector<float> host(static_cast<std::size_t>(n)), want(host.size());
  for (std::int64_t i = 0; i < n; ++i) {
    host[static_cast<std::size_t>(i)] = checks::value(pg.rank(), i);
    want[static_cast<std::size_t>(i)] = checks::value(root, i);
  }
  DeviceBuffer buf(host.size());
  buf.upload(host);
  pg.broadcast(buf.span(), root).wait();
  return checks::count_wrong(buf.download(), want);
}

TEST_F(DistNccl, NamesItsBackendAndNumbersItsOps) {
  EXPECT_EQ(pg().backend(), "nccl");
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(pg().rank(), mpi_rank());
  EXPECT_EQ(pg().size(), size);
  const std::uint64_t before = pg().last_seq();
  pg().barrier().wait();
  EXPECT_EQ(pg().last_seq(), before + 1);
}

TEST_F(DistNccl, EveryCollectiveExact) {
  std::int64_t wrong = 0;
  for (std::int64_t n : {0, 1, 7, 1000, 65537}) {
    wrong += check_allreduce(pg(), n);
    wrong += check_reduce_scatter(pg(), n, false);
    wrong += check_reduce_scatter(pg(), n, true);
    wrong += check_all_gather(pg(), n, false);
    wrong += check_all_gather(pg(), n, true);
    for (int root = 0; root < pg().size(); ++root) wrong += check_broadcast(pg(), n, root);
  }
  EXPECT_EQ(wrong, 0) << "on rank " << pg().rank();
  EXPECT_EQ(total_over_ranks(wrong), 0);
}

// bf16 sums (distributed/nccl_bf16_sums.hpp): the fp32 fold in rank order, rounded once, bit for
// bit the MPI and simulated backends' (tests/dist_checks.hpp's check_rank_order_bf16), which
// NCCL's own ncclBfloat16 sums, rounding at every hop, are not from 3 ranks on.
TEST_F(DistNccl, Bf16SumsAreTheFp32FoldInRankOrder) {
  using Bits = std::uint16_t;
  const int ranks = pg().size();
  const auto input = [](int rank, std::int64_t j) {
    return bf16_bits(checks::scrambled<float>(rank, j));
  };
  const auto fold = [&](std::int64_t j) {
    float acc = bf16_value(input(0, j));
    for (int r = 1; r < ranks; ++r) acc += bf16_value(input(r, j));
    return bf16_bits(acc);
  };
  std::int64_t wrong = 0;
  for (std::int64_t n : {1, 7, 1003, 65537}) {
    const auto len = static_cast<std::size_t>(n);
    std::vector<Bits> host(len), want(len);
    for (std::size_t i = 0; i < len; ++i) {
      host[i] = input(pg().rank(), static_cast<std::int64_t>(i));
      want[i] = fold(static_cast<std::int64_t>(i));
    }
    DeviceArray<Bits> buf(len);
    buf.upload(host);
    pg().allreduce(buf.span()).wait();
    wrong += checks::count_bits_differ(buf.download().data(), want);
    for (bool in_place : {false, true}) {
      std::vector<Bits> in(len * static_cast<std::size_t>(ranks));
      for (std::size_t j = 0; j < in.size(); ++j) in[j] = input(pg().rank(), static_cast<std::int64_t>(j));
      for (std::size_t i = 0; i < len; ++i) want[i] = fold(pg().rank() * n + static_cast<std::int64_t>(i));
      DeviceArray<Bits> din(in.size()), out(len);
      din.upload(in);
      const std::span<Bits> mine = din.segment(static_cast<std::size_t>(pg().rank()), len);
      pg().reduce_scatter(din.span(), in_place ? mine : out.span()).wait();
      const std::vector<Bits> got = in_place ? din.download() : out.download();
      wrong += checks::count_bits_differ(got.data() + (in_place ? pg().rank() * n : 0), want);
    }
  }
  EXPECT_EQ(wrong, 0) << "on rank " << pg().rank();
  EXPECT_EQ(total_over_ranks(wrong), 0);
}

TEST_F(DistNccl, SeveralOpsInFlightWaitedInReverse) {
  const std::size_t n = 100003;
  std::vector<float> host(n), want(n, 0.0f);
  for (std::size_t i = 0; i < n; ++i) {
    host[i] = checks::value(pg().rank(), static_cast<std::int64_t>(i));
    for (int r = 0; r < pg().size(); ++r) want[i] += checks::value(r, static_cast<std::int64_t>(i));
  }
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  std::vector<Work> works;
  for (int b = 0; b < 3; ++b) {
    bufs.push_back(std::make_unique<DeviceBuffer>(n));
    bufs.back()->upload(host);
    works.push_back(pg().allreduce(bufs.back()->span()));
  }
  for (std::size_t b = works.size(); b-- > 0;) works[b].wait();
  std::int64_t wrong = 0;
  for (const auto& b : bufs) wrong += checks::count_wrong(b->download(), want);
  for (Work& w : works) wrong += w.is_completed() ? 0 : 1;
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(total_over_ranks(wrong), 0);
}

// The op must see what the compute stream wrote before it started, though nothing synchronizes
// the host: zero the buffer, then overwrite it with the values by a long chain of copies on the
// compute stream, and start the allreduce at once. Without the event ordering it would read
// zeros or a mix (the chain takes milliseconds, the op's launch microseconds).
TEST_F(DistNccl, OrderedAfterTheComputeStream) {
  const std::size_t n = std::size_t{1} << 24;  // 64 MiB
  std::vector<float> host(n), want(n, 0.0f);
  for (std::size_t i = 0; i < n; ++i) {
    host[i] = checks::value(pg().rank(), static_cast<std::int64_t>(i));
    for (int r = 0; r < pg().size(); ++r) want[i] += checks::value(r, static_cast<std::int64_t>(i));
  }
  DeviceBuffer src(n), a(n), buf(n);
  src.upload(host);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemsetAsync(buf.data(), 0, n * sizeof(float), compute_));
  for (int hop = 0; hop < 20; ++hop) {
    CUDA_OK(cudaMemcpyAsync(a.data(), src.data(), n * sizeof(float), cudaMemcpyDeviceToDevice,
                            compute_));
    CUDA_OK(cudaMemcpyAsync(buf.data(), a.data(), n * sizeof(float), cudaMemcpyDeviceToDevice,
                            compute_));
  }
  Work w = pg().allreduce(buf.span());
  w.wait();
  const std::int64_t wrong = checks::count_wrong(buf.download(), want);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(total_over_ranks(wrong), 0);
}

TEST_F(DistNccl, FunnelTallyCountsElementsPerRank) {
  const std::size_t n = 96;
  DeviceBuffer full(n * static_cast<std::size_t>(pg().size())), shard(n);
  full.upload(std::vector<float>(n * static_cast<std::size_t>(pg().size()), 1.0f));
  pg().reset_tally();
  pg().allreduce(shard.span()).wait();
  pg().reduce_scatter(full.span(), shard.span()).wait();
  pg().all_gather(shard.span(), full.span()).wait();
  pg().barrier().wait();
  const CollectiveTally& t = pg().tally();
  EXPECT_EQ(t.elements_of(Collective::AllReduce), static_cast<std::int64_t>(n));
  EXPECT_EQ(t.elements_of(Collective::ReduceScatter), static_cast<std::int64_t>(n));
  EXPECT_EQ(t.elements_of(Collective::AllGather), static_cast<std::int64_t>(n));
  EXPECT_EQ(t.ops_of(Collective::Barrier), 1u);
  EXPECT_EQ(t.ops_of(Collective::Broadcast), 0u);
}

// Runs where the others cannot: a rank without a GPU must fail setup with a message naming it,
// and (at several ranks) so must its peers, instead of waiting in NCCL for it.
// True on every rank when `values` is the same on every rank (bit for bit).
bool same_on_every_rank(const std::vector<float>& values) {
  std::vector<float> low(values.size()), high(values.size());
  const int n = static_cast<int>(values.size());
  MPI_Allreduce(values.data(), low.data(), n, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(values.data(), high.data(), n, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
  // Every rank enters the last collective, whatever its own verdict.
  return total_over_ranks(low == values && high == values ? 0 : 1) == 0;
}

// The distributed contracts (tests/test_dist_policy.cpp) with the model on the GPUs and NCCL
// between the ranks: every policy trains the one-rank model, the replicas agree bit for bit,
// and at 2 ranks (where any reduction order adds the same two numbers) ZeRO-1/2/3 equal DDP bit
// for bit, as the simulated world on one GPU does.
TEST_F(DistNccl, PolicyContractsOnTheGpus) {
  using namespace harness;
  // The trainer's arrangement: the ranks compute on the default stream and the group is ordered
  // after it (the suite's group follows a stream of its own, which the policy refuses).
  const std::unique_ptr<ProcessGroup> group =
      make_nccl_process_group(ProcessGroupOptions{std::chrono::seconds(60)}, nullptr);
  {
    Net model(Init(Target::Cuda, init_spec(1)));
    EXPECT_THROW(ShardingPolicy(Policy::Ddp, walk_units(model), pg(),
                                Context::for_target(Target::Cuda)),
                 Error);
  }
  std::vector<double> ref_losses;
  const std::vector<float> ref = train_single(&ref_losses, Target::Cuda);
  const double tol = 1e-4 * max_abs(ref) + 1e-6;
  std::vector<float> ddp;
  for (Policy p : {Policy::Ddp, Policy::Zero1, Policy::Zero2, Policy::Zero3}) {
    SCOPED_TRACE(to_string(p));
    RunOptions o{p, group->size()};
    o.target = Target::Cuda;
    o.rank_seeds = true;  // the initial broadcast must make the replicas rank 0's
    const RankResult r = train_rank(*group, o);
    ASSERT_EQ(r.params.size(), ref.size());
    std::int64_t off = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) off += std::fabs(r.params[i] - ref[i]) > tol;
    EXPECT_EQ(total_over_ranks(off), 0) << "parameters off the one-rank run on rank " << group->rank();
    EXPECT_LT(r.losses.back(), r.losses.front());
    EXPECT_TRUE(same_on_every_rank(r.params));
    if (p == Policy::Ddp) {
      ddp = r.params;
    } else if (group->size() <= 2) {
      EXPECT_EQ(r.params, ddp);
    }
  }
}

// bf16 gradients between GPUs (--grad-dtype bf16): held in bf16, reduced by NCCL's bf16 sums in
// rank order, they train the bits of fp32 gradients with bf16 reductions under every policy,
// clipped every step.
TEST_F(DistNccl, Bf16GradientsTrainTheBitsOfBf16Reductions) {
  using namespace harness;
  const std::unique_ptr<ProcessGroup> group =
      make_nccl_process_group(ProcessGroupOptions{std::chrono::seconds(60)}, nullptr);
  for (Policy p : {Policy::Ddp, Policy::Zero1, Policy::Zero2, Policy::Zero3}) {
    SCOPED_TRACE(to_string(p));
    RunOptions o{p, group->size()};
    o.target = Target::Cuda;
    o.clip = 0.05;
    o.reduce_dtype = DType::BF16;
    const RankResult wire = train_rank(*group, o);
    o.grad_dtype = DType::BF16;
    const RankResult grads = train_rank(*group, o);
    EXPECT_EQ(grads.params, wire.params);
    EXPECT_EQ(grads.norms, wire.norms);
    EXPECT_LT(grads.losses.back(), grads.losses.front());
    EXPECT_TRUE(same_on_every_rank(grads.params));
  }
}

TEST(DistNcclSetup, RefusedWithoutGpuWithAClearMessage) {
  if (visible_cuda_devices() > 0) GTEST_SKIP() << "a GPU is present: the refusal cannot happen";
  try {
    auto pg = make_nccl_process_group();
    ADD_FAILURE() << "an NCCL group was created without a GPU";
  } catch (const LibraryError& e) {
    const std::string what = e.what();
    std::printf("refused as expected: %s\n", what.c_str());
    EXPECT_NE(what.find("sees no CUDA device"), std::string::npos) << what;
    EXPECT_NE(what.find("rank " + std::to_string(mpi_rank())), std::string::npos) << what;
  }
}

// Rank `skipper` skips allreduce #2 and stays busy outside NCCL and MPI: the peers' watchdogs
// must abort the communicator and end the job, naming it (tests/dist_nccl.cmake checks the text).
int run_watchdog(int timeout_ms, int skipper) {
  const std::string why = why_not_runnable();
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (!why.empty() || size < 2) {
    if (mpi_rank() == 0) {
      std::printf("SKIPPED: %s\n",
                  why.empty() ? "the watchdog test needs >= 2 ranks" : why.c_str());
    }
    return 0;
  }
  select_local_device();
  auto pg = make_nccl_process_group(ProcessGroupOptions{std::chrono::milliseconds(timeout_ms)});
  float* x = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&x), 1000 * sizeof(float)) != cudaSuccess) return 1;
  pg->allreduce(std::span<float>(x, 1000)).wait();  // #1: everybody
  if (pg->rank() == skipper) {
    std::this_thread::sleep_for(std::chrono::seconds(60));
    std::fprintf(stderr, "rank %d: the job was not aborted\n", pg->rank());
    return 0;
  }
  pg->allreduce(std::span<float>(x, 1000)).wait();  // #2: never completes
  std::fprintf(stderr, "rank %d: allreduce #2 completed without rank %d\n", pg->rank(), skipper);
  return 0;
}

}  // namespace

// Listing the tests (ctest's discovery at build time, gpu_check.sh's count) starts no MPI: an
// MPI singleton asks Open MPI for a helper daemon, which it starts through ssh or rsh, and a
// build on a machine without either would fail at this step.
static bool only_lists_tests(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]).starts_with("--gtest_list_tests")) return true;
  }
  return false;
}

int main(int argc, char** argv) {
  if (only_lists_tests(argc, argv)) {
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
  }
  try {
    noeira::dist::MpiRuntime mpi(&argc, &argv);
    if (argc == 4 && std::string(argv[1]) == "watchdog") {
      return run_watchdog(std::atoi(argv[2]), std::atoi(argv[3]));
    }
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "noeira: error: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}

#endif  // NOEIRA_HAVE_CUDA
