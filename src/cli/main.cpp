// The noeira binary: the command line (cli/command_line.hpp) over the built-in presets.
#include "cli/command_line.hpp"

int main(int argc, char** argv) {
  return noeira::run_command_line(argc, argv, noeira::preset_entries());
}
