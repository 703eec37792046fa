#pragma once
// Shared by the tests that drive the noeira binary (NOEIRA_BINARY): running it with its output
// captured, the one-line error contract of src/cli/main.cpp, and the tensor lines of
// `noeira inspect`.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "io_test_files.hpp"

namespace noeira::testing {

struct Output {
  int code = -1;  // the exit status, or 128 + the signal that ended the process
  std::string out;
  std::string err;
};

inline std::string slurp(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `noeira <args>` with stdout and stderr captured to files in dir; with seconds > 0 under
// timeout(1), which ends a hung run with code 124 (then 137 if it ignores SIGTERM).
inline Output noeira(const TempDir& dir, const std::string& args, int seconds = 0) {
  const std::string binary = NOEIRA_BINARY;
  const std::string limit =
      seconds > 0 ? "timeout -k 2 " + std::to_string(seconds) + " " : std::string();
  const std::string cmd = limit + "'" + binary + "' " + args + " >'" + (dir / "stdout").string() +
                          "' 2>'" + (dir / "stderr").string() + "' </dev/null";
  const int status = std::system(cmd.c_str());
  Output o;
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  o.out = slurp(dir / "stdout");
  o.err = slurp(dir / "stderr");
  return o;
}

#define REQUIRE_BINARY()                                                             \
  do {                                                                               \
    if (std::string(NOEIRA_BINARY).empty()) GTEST_SKIP() << "noeira binary not built"; \
  } while (0)

inline void expect_one_error_line(const Output& o, const std::string& fragment) {
  EXPECT_NE(o.code, 0);
  EXPECT_EQ(o.err.rfind("noeira: error: ", 0), 0u) << o.err;
  EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << "not one line: " << o.err;
  EXPECT_NE(o.err.find(fragment), std::string::npos) << o.err;
}

// The tensor lines of `noeira inspect` (name, shape, norm), without the header that names the
// world size and policy.
inline std::string inspect_tensors(const TempDir& dir, const std::filesystem::path& ckpt) {
  const Output o = noeira(dir, "inspect " + ckpt.string());
  EXPECT_EQ(o.code, 0) << o.err;
  std::istringstream lines(o.out);
  std::string tensors;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  params/", 0) == 0) tensors += line + "\n";
  }
  EXPECT_NE(tensors.find("params/0.weight/m"), std::string::npos) << o.out;
  return tensors;
}

}  // namespace noeira::testing
