#include "cli/plot.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "cli/bounds.hpp"
#include "kernels/error.hpp"
#include "train/stop_signal.hpp"

extern char** environ;

namespace noeira::cli {

namespace {

// Debian's interpreter, which has python3-matplotlib: the `python3` first on PATH may be another
// one without it.
constexpr const char* kPython = "/usr/bin/python3";

std::filesystem::path plot_script() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw InputError("noeira plot: cannot find the noeira binary's directory");
  const std::filesystem::path bin = exe.parent_path();
  const std::filesystem::path installed = (bin / "../share/noeira").lexically_normal();
  const std::filesystem::path build_tree = bin / "share/noeira";
  for (const std::filesystem::path& dir : {installed, build_tree}) {
    if (std::filesystem::is_regular_file(dir / "plot_runs.py", ec)) return dir / "plot_runs.py";
  }
  throw InputError(detail::concat("noeira plot: plot_runs.py is neither in ", installed.string(),
                                  " nor in ", build_tree.string(),
                                  " (install noeira, or run the binary of a build tree)"));
}

}  // namespace

void add_plot_command(CLI::App& app, PlotOptions& o) {
  CLI::App* a = app.add_subcommand(
      "plot", "Draw the training curves of runs (loss, accuracy, throughput against steps) into "
              "an image, runs overlaid; needs python3-matplotlib");
  a->option_defaults()->always_capture_default();
  a->add_option("runs", o.runs, "Output directories of noeira train (their metrics.jsonl)")
      ->required();
  a->add_option("-o,--out", o.out, "Image file: PNG, or SVG or PDF by its extension");
  a->add_option("--width", o.width, "Width in pixels")->check(whole_in(100, 10'000));
  a->add_option("--height", o.height, "Height in pixels")->check(whole_in(100, 10'000));
}

int plot_main(const PlotOptions& o) {
  if (::access(kPython, X_OK) != 0) {
    throw InputError(detail::concat("noeira plot needs ", kPython,
                                    " (Debian: apt install python3 python3-matplotlib)"));
  }
  const std::string script = plot_script().string();
  const std::string width = std::to_string(o.width);
  const std::string height = std::to_string(o.height);
  // "--": a run directory whose name starts with '-' is still a run.
  std::vector<const char*> args = {kPython, script.c_str(), "-o", o.out.c_str(), "--width",
                                   width.c_str(), "--height", height.c_str(), "--"};
  for (const std::string& run : o.runs) args.push_back(run.c_str());
  args.push_back(nullptr);
  pid_t child = 0;
  // The script starts with the stop signals unblocked (this process blocks them in every thread
  // but one, and a child inherits the mask): a SIGTERM ends it.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  const sigset_t mask = child_signal_mask();
  posix_spawnattr_setsigmask(&attr, &mask);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  // posix_spawn's argv is char* const[] for historical reasons; it does not write to it.
  const int spawned = ::posix_spawn(&child, kPython, nullptr, &attr,
                                    const_cast<char* const*>(args.data()), environ);
  posix_spawnattr_destroy(&attr);
  if (spawned != 0) {
    throw InputError(detail::concat("noeira plot: cannot run ", kPython, " (",
                                    std::strerror(spawned), ")"));
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) throw Error(detail::concat("noeira plot: waitpid: ", std::strerror(errno)));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  throw Error(detail::concat("noeira plot: ", script, " died of signal ", WTERMSIG(status)));
}

}  // namespace noeira::cli
