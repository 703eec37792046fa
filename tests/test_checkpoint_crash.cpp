// Crash safety: a child process writing a checkpoint is killed with SIGKILL, at every stage of
// the write and commit protocol (through the test hook) and at random moments of a larger write;
// `latest` must then name a complete checkpoint (the previous one, or the new one once `latest`
// was replaced) that loads bit-identical, and the next save must succeed and clean up.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>

#include "checkpoint_test_util.hpp"

namespace noeira {
namespace {

using testing::CkptModel;
using testing::TempDir;
using testing::expect_reads_back;
using testing::make_model;
using testing::write_checkpoint;

// The stage at which the child kills itself (set before fork, read by the hook in the child).
const char* g_kill_stage = nullptr;

void kill_at_stage(std::string_view stage) {
  if (g_kill_stage != nullptr && stage == g_kill_stage) raise(SIGKILL);
}

std::vector<std::string> entries(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Forks; the child runs f and exits 0. Returns the wait status.
template <class F>
int run_in_child(F&& f, std::chrono::milliseconds kill_after = std::chrono::milliseconds(0)) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    try {
      f();
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  if (kill_after.count() > 0) {
    std::this_thread::sleep_for(kill_after);
    kill(pid, SIGKILL);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

class CheckpointKilledAtStage : public ::testing::TestWithParam<const char*> {};

TEST_P(CheckpointKilledAtStage, LatestStaysLoadable) {
  const std::string stage = GetParam();
  TempDir dir;
  std::mt19937 rng(31);
  const CkptModel before = make_model(100);
  const CkptModel after = make_model(200);
  write_checkpoint(dir.path(), before, 10, 3, rng, 1);

  g_kill_stage = GetParam();
  io::test_hooks::set_checkpoint_hook(kill_at_stage);
  const int status =
      run_in_child([&] { write_checkpoint(dir.path(), after, 20, 2, rng, 1); });
  io::test_hooks::set_checkpoint_hook(nullptr);
  g_kill_stage = nullptr;
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the child was not killed at stage " << stage << " (status " << status << ")";

  // `latest` moves to step 20 exactly when its rename happened, never before.
  const bool moved = stage == "latest_renamed" || stage == "pruned";
  const auto latest = io::latest_checkpoint(dir.path());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->filename(), moved ? "step-00000020" : "step-00000010");
  const io::CheckpointReader ckpt = io::CheckpointReader::open(dir.path());
  EXPECT_EQ(ckpt.meta().world_size, moved ? 2 : 3);
  expect_reads_back(dir.path(), moved ? after : before, 2, rng);

  // The next save succeeds and removes the debris (temporary directories, the pruned step).
  const CkptModel next = make_model(300);
  write_checkpoint(dir.path(), next, 30, 4, rng, 1);
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"latest", "step-00000030"}));
  expect_reads_back(dir.path(), next, 3, rng);
}

INSTANTIATE_TEST_SUITE_P(
    Stages, CheckpointKilledAtStage,
    ::testing::Values("rank_file_open", "slice_written", "rank_file_synced", "rank_file_renamed",
                      "tmp_dir_synced", "step_dir_renamed", "latest_tmp_synced", "latest_renamed",
                      "pruned"),
    [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

// A model whose values are a function of the step, so that any loaded checkpoint can be checked
// against the step it claims: two tensors of 3 Mi elements (24 MiB with the moments).
CkptModel big_model(std::int64_t step) {
  CkptModel model;
  model.signature = {{"0.weight", {1024, 3072}}};
  for (const char* kind : {"val", "m"}) {
    testing::LogicalTensor t{io::param_tensor_name("0.weight", kind), {1024, 3072}, {}};
    t.values.resize(1024 * 3072);
    for (std::size_t i = 0; i < t.values.size(); ++i) {
      t.values[i] = static_cast<float>(i % 4099) + static_cast<float>(step) * 0.25f;
    }
    model.tensors.push_back(std::move(t));
  }
  return model;
}

TEST(CheckpointKilledMidWrite, RandomKillsLeaveALoadableLatest) {
  TempDir dir;
  std::mt19937 rng(41);
  write_checkpoint(dir.path(), big_model(10), 10, 2, rng, 2);
  std::set<std::int64_t> seen;
  for (const int delay_ms : {15, 60, 140, 260, 420}) {
    // Each child continues after the checkpoint the previous one left.
    const std::int64_t start = io::CheckpointReader::open(dir.path()).meta().step + 10;
    const int status = run_in_child(
        [&] {
          std::mt19937 child_rng(static_cast<unsigned>(delay_ms));
          for (std::int64_t step = start;; step += 10) {
            write_checkpoint(dir.path(), big_model(step), step, 2, child_rng, 2);
          }
        },
        std::chrono::milliseconds(delay_ms));
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
    const io::CheckpointReader ckpt = io::CheckpointReader::open(dir.path());
    const std::int64_t step = ckpt.meta().step;
    seen.insert(step);
    const CkptModel want = big_model(step);
    for (const testing::LogicalTensor& t : want.tensors) {
      ASSERT_EQ(testing::bits(ckpt.read_all(t.name)), testing::bits(t.values))
          << t.name << " of step " << step << " after a kill at " << delay_ms << " ms";
    }
  }
  RecordProperty("steps_seen", ::testing::PrintToString(seen));
}

}  // namespace
}  // namespace noeira
