#pragma once
// Shared by the tests that drive the noeira binary (NOEIRA_BINARY): running it with its output
// captured or in the background, the records of its metrics file, the one-line error contract of
// src/cli/command_line.cpp, and the tensor lines of `noeira inspect`.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "io_test_files.hpp"

extern char** environ;

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

// The records of a run's metrics.jsonl whose "type" is `type` ("step", "epoch"), in order.
inline std::vector<nlohmann::json> metrics_records(const std::filesystem::path& metrics,
                                                   const std::string& type) {
  std::ifstream in(metrics);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] == type) records.push_back(std::move(j));
  }
  return records;
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

// Starts `noeira <args...>` in the background with stdout and stderr to files in dir.
inline pid_t spawn_noeira(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv_strings = {NOEIRA_BINARY};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, (dir / "bg-stdout").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, (dir / "bg-stderr").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// The step `latest` in ckpt_dir names, or -1 while there is none.
inline std::int64_t latest_step(const std::filesystem::path& ckpt_dir) {
  std::ifstream in(ckpt_dir / "latest");
  std::string name;
  if (!(in >> name) || name.rfind("step-", 0) != 0) return -1;
  return std::stoll(name.substr(5));
}

}  // namespace noeira::testing
