#pragma once
// `noeira plot RUN [RUN ...] -o curves.png`: training curves of one or several runs, drawn by
// scripts/plot_runs.py with the system's Python and matplotlib (the binary links no plotting
// library). The script lies in share/noeira beside the binary's directory: installed,
// <prefix>/bin/../share/noeira; in the build tree, <build>/share/noeira.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace noeira::cli {

struct PlotOptions {
  std::vector<std::string> runs;  // output directories of noeira train (their metrics.jsonl)
  std::string out = "curves.png";
  int width = 1200;  // pixels
  int height = 800;
};

void add_plot_command(CLI::App& app, PlotOptions& o);

// Runs the script and returns its exit status (its errors are its own one-line messages); a
// missing interpreter or script is an InputError.
int plot_main(const PlotOptions& o);

}  // namespace noeira::cli
