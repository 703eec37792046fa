#pragma once
// The whole noeira command line — train, eval, generate, inspect, export, plot, with every flag,
// the three launch modes, checkpoints, resume and the rest — for the models of a catalogue. The
// noeira binary is this function over the presets (cli/main.cpp); a user's program is the same
// function over its own models (docs/library.md):
//
//   #include <noeira/noeira.hpp>
//   using Net = noeira::Sequential<noeira::LinearReLU<16, 64>, noeira::Linear<64, 4>>;
//   int main(int argc, char** argv) {
//     return noeira::run_command_line(argc, argv,
//                                     {noeira::model_entry<Net>("net", "my model")});
//   }
//
// It installs a catalogue of `models` as the process's (train/model_catalogue.hpp; a catalogue no
// command line could use is one error line naming the entry, exit 1), parses, runs the
// subcommand and returns the exit status: 0, 1 for a failure found while running (one line on
// stderr, "<program>: error: ..."), 2 for a command-line mistake, kStoppedExitCode for a run
// stopped by a signal to be resumed. Under mpirun it initializes MPI for the run and finalizes it.
// Call it from main() before any thread exists, once.
#include <vector>

#include "train/model_catalogue.hpp"

namespace noeira {

int run_command_line(int argc, char** argv, std::vector<ModelEntry> models);

}  // namespace noeira
