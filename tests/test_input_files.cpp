// Files that are not what they seem (issue 17, cases 6 and 8): a FIFO where a data file, a config,
// `latest` or a rank file should be is refused before it is opened (opening one blocks until a
// writer comes: forever, and with --checkpoint-dir a SIGTERM could not end the wait); `latest` is
// read no further than a step name could be and quoted safely; a second SIGTERM ends a run at
// once. Each binary run has a timeout, so a regression fails in seconds rather than hangs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_test_util.hpp"
#include "io_test_files.hpp"
#include "train/stop_signal.hpp"

namespace noeira {
namespace {

using testing::Output;
using testing::TempDir;
using testing::expect_one_error_line;
using testing::noeira;

constexpr int kLimitSeconds = 20;

void make_fifo(const std::filesystem::path& path) {
  std::filesystem::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
}

TEST(InputFiles, AFifoIsRefusedAsDataConfigLatestOrRankFile) {
  REQUIRE_BINARY();
  TempDir dir;
  testing::write_tiny_mnist(dir / "data", 40, 20, false);
  const std::filesystem::path images = dir / "data" / "train-images-idx3-ubyte";
  make_fifo(images);
  Output o = noeira(dir,
                    "train --data-dir " + (dir / "data").string() + " --out " +
                        (dir / "run").string() + " --checkpoint-dir " + (dir / "ck").string(),
                    kLimitSeconds);
  expect_one_error_line(o, images.string() + ": is a FIFO, expected a regular file");
  EXPECT_EQ(o.code, 1);

  make_fifo(dir / "config.json");
  o = noeira(dir, "train --config " + (dir / "config.json").string(), kLimitSeconds);
  expect_one_error_line(o, (dir / "config.json").string() + ": is a FIFO");

  std::filesystem::create_directories(dir / "ck1");
  make_fifo(dir / "ck1" / "latest");
  o = noeira(dir, "inspect " + (dir / "ck1").string(), kLimitSeconds);
  expect_one_error_line(o, (dir / "ck1" / "latest").string() + ": is a FIFO");

  const std::filesystem::path step = dir / "ck2" / "step-00000001";
  std::filesystem::create_directories(step);
  make_fifo(step / "rank-00000.h5");
  o = noeira(dir, "inspect " + step.string(), kLimitSeconds);
  expect_one_error_line(o, (step / "rank-00000.h5").string() + ": is a FIFO");
}

TEST(InputFiles, LatestIsReadNoFurtherThanAStepNameAndQuotedSafely) {
  REQUIRE_BINARY();
  TempDir dir;
  std::filesystem::create_directories(dir / "ck");
  {
    std::ofstream big(dir / "ck" / "latest", std::ios::binary);
    big << "step-\n\x01";
    big << std::string(1 << 20, 'x');
  }
  Output o = noeira(dir, "inspect " + (dir / "ck").string(), kLimitSeconds);
  expect_one_error_line(o, "latest: holds more than 64 bytes ('step-\\x0a\\x01xxxxxxxxx...')");
  std::ofstream(dir / "ck" / "latest", std::ios::binary) << "st\x1b[2Jep";
  o = noeira(dir, "inspect " + (dir / "ck").string(), kLimitSeconds);
  expect_one_error_line(o, "latest: holds 'st\\x1b[2Jep', not a step-NNNNNNNN directory name");
}

// In a child process: the stop handlers, then the signals; how the child ended.
int child_status(int first, int second) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    install_stop_handlers();
    std::raise(first);
    std::raise(second);
    ::_exit(stop_signal() == first ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(StopSignal, ASecondSigtermEndsTheProcessAtOnce) {
  const int twice = child_status(SIGTERM, SIGTERM);
  ASSERT_TRUE(WIFSIGNALED(twice)) << "exited " << WEXITSTATUS(twice) << " after two SIGTERMs";
  EXPECT_EQ(WTERMSIG(twice), SIGTERM);
  // A scheduler's SIGTERM after its warning SIGUSR1 lets the asked-for checkpoint finish.
  const int warned = child_status(SIGUSR1, SIGTERM);
  ASSERT_TRUE(WIFEXITED(warned));
  EXPECT_EQ(WEXITSTATUS(warned), 0);
}

// In a child process whose stop signals go to one thread of their own: `signals` sent to the
// process (not to a thread, as a scheduler's are), each after the previous one was taken; the
// handlers installed when `handled`. Exits 0 when the first signal was taken as the stop and a
// thread started after the routing blocks both signals.
int routed_child_status(std::vector<int> signals, bool handled) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    route_stop_signals_to_one_thread();
    if (handled) install_stop_handlers();
    bool blocked = false;
    std::thread([&] {
      sigset_t mask;
      pthread_sigmask(SIG_SETMASK, nullptr, &mask);
      blocked = sigismember(&mask, SIGTERM) == 1 && sigismember(&mask, SIGUSR1) == 1;
    }).join();
    const sigset_t child = child_signal_mask();
    if (!blocked || sigismember(&child, SIGTERM) == 1 || sigismember(&child, SIGUSR1) == 1) {
      ::_exit(2);
    }
    for (const int s : signals) {
      ::kill(::getpid(), s);
      // Taken by the receiving thread, not this one (it blocks them): wait up to 10 s.
      for (int i = 0; i < 1000 && stop_signal() != signals.front(); ++i) ::usleep(10'000);
    }
    ::usleep(2'000'000);  // time for a later signal to end the process, where it does
    ::_exit(stop_signal() == signals.front() ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(StopSignal, ReachesOneThreadOfItsOwnAndActsAsBefore) {
  const int stop = routed_child_status({SIGUSR1}, true);
  ASSERT_TRUE(WIFEXITED(stop));
  EXPECT_EQ(WEXITSTATUS(stop), 0) << "1: not taken as the stop; 2: a thread had it unblocked";
  const int twice = routed_child_status({SIGTERM, SIGTERM}, true);
  ASSERT_TRUE(WIFSIGNALED(twice)) << "exited " << WEXITSTATUS(twice) << " after two SIGTERMs";
  EXPECT_EQ(WTERMSIG(twice), SIGTERM);
  const int warned = routed_child_status({SIGUSR1, SIGTERM}, true);
  ASSERT_TRUE(WIFEXITED(warned));
  EXPECT_EQ(WEXITSTATUS(warned), 0);
  // Without the handlers (no --checkpoint-dir), a SIGTERM still ends the process.
  const int plain = routed_child_status({SIGTERM}, false);
  ASSERT_TRUE(WIFSIGNALED(plain));
  EXPECT_EQ(WTERMSIG(plain), SIGTERM);
}

}  // namespace
}  // namespace noeira
